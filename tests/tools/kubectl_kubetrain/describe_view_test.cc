// The describe screen from a TrainingJob as the operator writes its status,
// its pods and the namespace's Events.
#include "tools/kubectl_kubetrain/describe_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/kube/object.h"
#include "tests/tools/kubectl_kubetrain/fake_cluster_reader.h"
#include "tools/kubectl_kubetrain/describe_command.h"

namespace kubetrain::kubectl_plugin {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

nlohmann::json Job() {
  return nlohmann::json::parse(R"({
    "metadata": {"name": "fm", "namespace": "ns", "creationTimestamp": "2026-11-22T07:00:00Z"},
    "status": {
      "startTime": "2026-11-22T07:00:05Z",
      "restartCount": 2, "disruptionCount": 1,
      "conditions": [
        {"type": "Created", "status": "True", "reason": "TrainingJobCreated",
         "message": "created", "lastTransitionTime": "2026-11-22T07:00:00Z"},
        {"type": "Running", "status": "True", "reason": "TrainingJobRunning",
         "message": "all replicas run", "lastTransitionTime": "2026-11-22T07:50:00Z"}],
      "lastFailure": {"replicaType": "Worker", "replicaIndex": 1, "pod": "fm-worker-1",
        "podUID": "u", "node": "node-b", "exitCode": 137, "reason": "OOMKilled",
        "message": "out of memory", "time": "2026-11-22T07:40:00Z"},
      "replicaStatuses": {"PS": {"active": 1, "ready": 1},
                          "Worker": {"active": 2, "ready": 2, "failed": 1, "restarts": 2}},
      "progress": {"step": 1200, "totalSteps": 5000, "loss": 0.412, "accuracy": 0.861,
                   "samplesPerSecond": 5230, "updatedAt": "2026-11-22T07:59:48Z"}}})");
}

nlohmann::json Event(const std::string& kind, const std::string& name, const std::string& reason,
                     const std::string& time) {
  return {{"involvedObject", {{"kind", kind}, {"name", name}}},
          {"type", reason == "OOMKilled" ? "Warning" : "Normal"},
          {"reason", reason},
          {"message", reason + " happened"},
          {"lastTimestamp", time},
          {"count", 1}};
}

TEST(DescribeViewTest, RendersStatusReplicasProgressAndTheJobsEvents) {
  DescribeInput in;
  in.job = Job();
  in.pods = {ReplicaPod("fm", "worker", 1, "w1", 2, "running"),
             ReplicaPod("fm", "ps", 0, "p0", 0, "waiting", "Pending")};
  in.events = {Event("TrainingJob", "fm", "OOMKilled", "2026-11-22T07:40:00Z"),
               Event("Pod", "fm-worker-1", "Started", "2026-11-22T07:41:00Z"),
               Event("TrainingJob", "other", "Created", "2026-11-22T07:42:00Z"),
               Event("TrainingJob", "fm", "SuccessfulCreate", "2026-11-22T07:00:01Z")};
  in.now_unix_micros = *kube::ParseTimeMicros("2026-11-22T08:00:00Z");
  std::string screen = RenderDescribe(in);
  EXPECT_THAT(screen, HasSubstr("Phase:        Running\n"));
  EXPECT_THAT(screen, HasSubstr("Restarts:     2   Disruptions: 1\n"));
  EXPECT_THAT(screen, HasSubstr("  Running  True    TrainingJobRunning  10m  all replicas run\n"));
  EXPECT_THAT(screen, HasSubstr("  Replica:    worker-1\n"));
  EXPECT_THAT(screen,
              HasSubstr("  Node:       node-b\n  Exit code:  137\n  Reason:     OOMKilled\n"));
  EXPECT_THAT(screen, HasSubstr("  Worker  2       2      0          1       2\n"));
  EXPECT_THAT(screen, HasSubstr("Progress:     step 1200/5000  loss 0.412  accuracy 0.861  "
                                "samples/s 5230  (updated 12s ago)\n"));
  EXPECT_THAT(screen, HasSubstr("  ps-0      fm-ps-0      ContainerCreating  0         node-a"));
  // Events: the job's and its pods', oldest first; not another job's.
  const size_t create = screen.find("SuccessfulCreate");
  const size_t oom = screen.find("OOMKilled happened");
  const size_t started = screen.find("pod/fm-worker-1");
  EXPECT_LT(create, oom);
  EXPECT_LT(oom, started);
  EXPECT_THAT(screen, Not(HasSubstr("trainingjob/other")));
}

TEST(DescribeViewTest, ShortAgesAndAJobWithoutStatus) {
  EXPECT_EQ(ShortAge(45'000'000), "45s");
  EXPECT_EQ(ShortAge(int64_t{12} * 60'000'000), "12m");
  EXPECT_EQ(ShortAge(int64_t{3} * 3600'000'000), "3h");
  EXPECT_EQ(ShortAge(int64_t{50} * 3600'000'000), "2d");
  DescribeInput in;
  in.job = {{"metadata", {{"name", "fm"}, {"namespace", "ns"}}}};
  std::string screen = RenderDescribe(in);
  EXPECT_THAT(screen, HasSubstr("Phase:        Pending\n"));
  EXPECT_THAT(screen, HasSubstr("Conditions:\n  <none>\n"));
  EXPECT_THAT(screen, Not(HasSubstr("Last failure")));
}

TEST(DescribeCommandTest, MissingJobIsNotFound) {
  FakeClusterReader api;
  EXPECT_TRUE(absl::IsNotFound(DescribeJob(api, "ns", "fm", 0).status()));
}

}  // namespace
}  // namespace kubetrain::kubectl_plugin
