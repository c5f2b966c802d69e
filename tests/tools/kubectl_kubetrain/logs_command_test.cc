// `logs` without -f: merged in time order, --replica, --previous, and a
// replica whose log cannot be read.
#include "tools/kubectl_kubetrain/logs_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "tests/tools/kubectl_kubetrain/fake_cluster_reader.h"

namespace kubetrain::kubectl_plugin {
namespace {

using ::testing::HasSubstr;

TEST(LogsCommandTest, MergesEveryReplicaAndNamesTheOnesItCannotRead) {
  FakeClusterReader api;
  api.SetJob(JobWithPhase("fm", "Running"));
  api.SetPods({ReplicaPod("fm", "worker", 1, "b", 2, "running"),
               ReplicaPod("fm", "chief", 0, "a", 0, "running"),
               ReplicaPod("fm", "ps", 0, "c", 0, "waiting", "Pending")});
  api.SetLog("fm-chief-0", "2026-11-22T07:55:01Z chief starts\n2026-11-22T07:55:04Z step 2\n");
  api.SetLog("fm-worker-1", "2026-11-22T07:55:03Z step 1\n");
  api.SetLog("fm-ps-0", absl::InvalidArgumentError("container \"kubetrain\" is waiting to start"));
  LogsOptions options{"ns", "fm", "", std::nullopt, false};
  std::ostringstream out, err;
  ASSERT_TRUE(PrintLogs(api, options, out, err).ok());
  EXPECT_EQ(out.str(), "[chief-0 r0] chief starts\n[worker-1 r2] step 1\n[chief-0 r0] step 2\n");
  EXPECT_THAT(err.str(), HasSubstr("ps-0 (pod fm-ps-0): container \"kubetrain\" is waiting"));

  options.only = ReplicaRef{"worker", 1};
  options.previous = true;
  std::ostringstream one;
  ASSERT_TRUE(PrintLogs(api, options, one, err).ok());
  EXPECT_EQ(one.str(), "[worker-1 r1] step 1\n");
  EXPECT_THAT(api.LogRequests().back(),
              HasSubstr("fm-worker-1/log?container=kubetrain&previous=true&timestamps=true"));

  options.only = ReplicaRef{"worker", 7};
  EXPECT_TRUE(absl::IsNotFound(PrintLogs(api, options, one, err)));
  FakeClusterReader empty;
  EXPECT_TRUE(absl::IsNotFound(PrintLogs(empty, options, one, err)));
}

// kubetrain-node-agent keeps no per-line times and refuses timestamps=true:
// each log is read again without them and printed replica by replica, while
// a container that has not started is still reported (its 400 stays a 400).
TEST(LogsCommandTest, ReadsWithoutTimestampsWhereTheServerRefusesThem) {
  FakeClusterReader api;
  api.RefuseTimestamps();
  api.SetJob(JobWithPhase("fm", "Running"));
  api.SetPods({ReplicaPod("fm", "worker", 1, "b", 1, "running"),
               ReplicaPod("fm", "worker", 0, "a", 0, "running"),
               ReplicaPod("fm", "ps", 0, "c", 0, "waiting", "Pending")});
  api.SetLog("fm-worker-0", "step 1\nstep 2\n");
  api.SetLog("fm-worker-1", "step 1\n");
  api.SetLog("fm-ps-0", absl::InvalidArgumentError("container \"kubetrain\" is waiting to start"));
  LogsOptions options{"ns", "fm", "", std::nullopt, false};
  std::ostringstream out, err;
  ASSERT_TRUE(PrintLogs(api, options, out, err).ok());
  EXPECT_EQ(out.str(), "[worker-0 r0] step 1\n[worker-0 r0] step 2\n[worker-1 r1] step 1\n");
  EXPECT_THAT(err.str(), HasSubstr("ps-0 (pod fm-ps-0): container \"kubetrain\" is waiting"));
  EXPECT_THAT(
      api.LogRequests(),
      ::testing::Contains("/api/v1/namespaces/ns/pods/fm-worker-0/log?container=kubetrain"));
}

}  // namespace
}  // namespace kubetrain::kubectl_plugin
