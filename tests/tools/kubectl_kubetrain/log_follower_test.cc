// `logs -f` end to end over the fake cluster: a container restart, a pod
// re-created under a new UID, a dropped stream resumed without repeats, the
// end once the job succeeded, and Stop().
#include "tools/kubectl_kubetrain/log_follower.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "absl/strings/str_split.h"
#include "tests/tools/kubectl_kubetrain/fake_cluster_reader.h"

namespace kubetrain::kubectl_plugin {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> LinesWith(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, prefix)) out.emplace_back(line);
  }
  return out;
}

FollowOptions Options() {
  FollowOptions o;
  o.ns = "ns";
  o.job = "fm";
  o.poll_interval = absl::Milliseconds(5);
  o.drain_timeout = absl::Seconds(30);
  return o;
}

TEST(LogFollowerTest, FollowsRestartsRecreatedPodsAndDroppedStreamsToTheJobsEnd) {
  FakeClusterReader api;
  const nlohmann::json running = JobWithPhase("fm", "Running");
  api.SetStages({
      // worker-0 r0 prints two lines and its connection drops; ps-0 runs on.
      Stage{running,
            {ReplicaPod("fm", "worker", 0, "w-a", 0, "running"),
             ReplicaPod("fm", "ps", 0, "p-a", 0, "running")},
            {{"fm-worker-0",
              {{"2026-11-22T07:55:01.5Z step 1", "2026-11-22T07:55:02.5Z step 2"},
               absl::UnavailableError("connection reset")}},
             {"fm-ps-0", {{"2026-11-22T07:55:01Z serving"}, absl::OkStatus()}}}},
      // Resumed from 07:55:02 (whole seconds): the repeated line is skipped.
      Stage{running,
            {ReplicaPod("fm", "worker", 0, "w-a", 0, "running"),
             ReplicaPod("fm", "ps", 0, "p-a", 0, "running")},
            {{"fm-worker-0",
              {{"2026-11-22T07:55:02.5Z step 2", "2026-11-22T07:55:03Z step 3", "lost peer"},
               absl::OkStatus()}}}},
      // The container restarted in place.
      Stage{running,
            {ReplicaPod("fm", "worker", 0, "w-a", 1, "running"),
             ReplicaPod("fm", "ps", 0, "p-a", 0, "terminated")},
            {{"fm-worker-0", {{"2026-11-22T07:55:10Z resumed at step 3"}, absl::OkStatus()}}}},
      // The pod was deleted and re-created (ExitCode policy): a new UID.
      Stage{running,
            {ReplicaPod("fm", "worker", 0, "w-b", 0, "running"),
             ReplicaPod("fm", "ps", 0, "p-a", 0, "terminated")},
            {{"fm-worker-0", {{"2026-11-22T07:56:00Z fresh pod", "done"}, absl::OkStatus()}}}},
      Stage{JobWithPhase("fm", "Succeeded"),
            {ReplicaPod("fm", "worker", 0, "w-b", 0, "terminated", "Succeeded"),
             ReplicaPod("fm", "ps", 0, "p-a", 0, "terminated")},
            {}},
  });
  std::ostringstream out, err;
  LineWriter writer(out);
  LogFollower follower(api, writer, err, Options());
  ASSERT_TRUE(follower.Run().ok());
  EXPECT_THAT(LinesWith(out.str(), "[worker-0"),
              ElementsAre("[worker-0 r0] step 1", "[worker-0 r0] step 2", "[worker-0 r0] step 3",
                          "[worker-0 r0] lost peer", "[worker-0 r1] resumed at step 3",
                          "[worker-0 r0] fresh pod", "[worker-0 r0] done"));
  EXPECT_THAT(LinesWith(out.str(), "[ps-0"), ElementsAre("[ps-0 r0] serving"));
  std::vector<std::string> requests = api.LogRequests();
  EXPECT_THAT(requests, ::testing::Contains(HasSubstr(
                            "fm-worker-0/log?container=kubetrain&follow=true&timestamps=true&"
                            "sinceTime=2026-11-22T07%3A55%3A02Z")));
}

// A log server without per-line times (kubetrain-node-agent answers
// timestamps=true with a 400): streams are read without them, and one that
// broke off is read again from its run's start with the lines already
// printed skipped, so each line appears once.
TEST(LogFollowerTest, WithoutTimestampsAResumedStreamSkipsWhatWasPrinted) {
  FakeClusterReader api;
  api.RefuseTimestamps();
  const nlohmann::json running = JobWithPhase("fm", "Running");
  const std::vector<nlohmann::json> pods = {ReplicaPod("fm", "worker", 0, "w-a", 0, "running")};
  api.SetStages({
      Stage{running,
            pods,
            {{"fm-worker-0", {{"step 1", "step 2"}, absl::UnavailableError("connection reset")}}}},
      // The whole run again, one line more.
      Stage{running, pods, {{"fm-worker-0", {{"step 1", "step 2", "step 3"}, absl::OkStatus()}}}},
      Stage{JobWithPhase("fm", "Succeeded"),
            {ReplicaPod("fm", "worker", 0, "w-a", 0, "terminated", "Succeeded")},
            {}},
  });
  std::ostringstream out, err;
  LineWriter writer(out);
  LogFollower follower(api, writer, err, Options());
  ASSERT_TRUE(follower.Run().ok());
  EXPECT_EQ(out.str(), "[worker-0 r0] step 1\n[worker-0 r0] step 2\n[worker-0 r0] step 3\n");
  for (const std::string& request : api.LogRequests()) {
    EXPECT_THAT(request, ::testing::Not(HasSubstr("sinceTime")));
  }
  EXPECT_EQ(err.str(), "");
}

TEST(LogFollowerTest, MissingJobIsNotFoundAndStopEndsAFollow) {
  FakeClusterReader api;
  std::ostringstream out, err;
  LineWriter writer(out);
  {
    LogFollower follower(api, writer, err, Options());
    EXPECT_TRUE(absl::IsNotFound(follower.Run()));
  }
  // A job that never ends: only Stop() ends the follow.
  api.SetStages({Stage{JobWithPhase("fm", "Running"),
                       {ReplicaPod("fm", "worker", 0, "w", 0, "waiting", "Pending")},
                       {}}});
  LogFollower follower(api, writer, err, Options());
  std::thread stopper([&] {
    // Stop once the follower has polled a few times: it waits for a pod.
    while (api.ListCalls() < 3) absl::SleepFor(absl::Milliseconds(1));
    follower.Stop();
  });
  EXPECT_TRUE(follower.Run().ok());
  stopper.join();
  EXPECT_EQ(out.str(), "");
}

}  // namespace
}  // namespace kubetrain::kubectl_plugin
