// Which replicas failed, from pods shaped as the kubelet and the control
// plane leave them: ended Failed, deleted for a disruption, on a lost node,
// waiting on an image; and pods stuck Terminating.
#include "operator/controller/failed_replicas.h"

#include <gtest/gtest.h>

#include "operator/kube/object.h"
#include "tests/operator/controller/planner_test_objects.h"

namespace kubetrain::controller {
namespace {

using namespace testing_objects;  // NOLINT(build/namespaces)
using api::FailureReason;
using api::ReplicaType;

const absl::Time kNow = absl::FromUnixSeconds(1795000000);

std::string Ago(int seconds) {
  return kube::FormatTime(absl::ToUnixMicros(kNow - absl::Seconds(seconds)));
}

// Worker `index` on node-b, with `status` merged into its status.
kube::ObjectPtr WorkerPod(int index, const Json& status, bool deleting = false) {
  Json pod = *Pod("worker", index, {.deleting = deleting});
  pod["spec"]["nodeName"] = "node-b";
  pod["status"].merge_patch(status);
  if (deleting) pod["metadata"]["deletionTimestamp"] = Ago(1);
  return std::make_shared<const Json>(std::move(pod));
}

Json Exited(int code) {
  return Json::array(
      {{{"name", "c"}, {"state", {{"terminated", {{"exitCode", code}, {"reason", "Error"}}}}}}});
}

TEST(FailedReplicasTest, NodeLostTimeoutFollowsTheSpec) {
  api::RunPolicy rp;
  EXPECT_EQ(NodeLostTimeout(rp, /*nodes_watched=*/false), std::nullopt);
  EXPECT_EQ(NodeLostTimeout(rp, true), absl::Seconds(api::kDefaultNodeLostTimeoutSeconds));
  rp.node_lost_timeout_seconds = 0;
  EXPECT_EQ(NodeLostTimeout(rp, true), std::nullopt);
  rp.node_lost_timeout_seconds = 90;
  EXPECT_EQ(NodeLostTimeout(rp, true), absl::Seconds(90));
}

TEST(FailedReplicasTest, FailedPodsAreClassified) {
  api::TrainingJob job = Job(0, 3);
  job.spec.replica_specs[ReplicaType::kWorker].restart_policy = api::RestartPolicy::kExitCode;
  ReplicaObjects pods;
  pods[{ReplicaType::kWorker, 0}] = WorkerPod(0, {{"phase", "Running"}});
  pods[{ReplicaType::kWorker, 1}] =
      WorkerPod(1, {{"phase", "Failed"}, {"containerStatuses", Exited(137)}});
  pods[{ReplicaType::kWorker, 2}] = WorkerPod(
      2, {{"phase", "Pending"},
          {"containerStatuses",
           Json::array(
               {{{"name", "c"},
                 {"state",
                  {{"waiting", {{"reason", "ImagePullBackOff"}, {"message", "no image"}}}}}}})}});
  const FailedReplicas found = FindFailedReplicas(job, pods, {}, nullptr, std::nullopt, kNow);
  ASSERT_EQ(found.failed.size(), 1u);
  const FailedReplica& f = found.failed[0];
  EXPECT_EQ(f.index, 1);
  EXPECT_EQ(f.pod_name, "j-worker-1");
  EXPECT_EQ(f.pod_uid, "Pod-worker-1");
  EXPECT_EQ(f.policy, api::RestartPolicy::kExitCode);
  EXPECT_EQ(f.exit.EffectiveCode(), 137);
  EXPECT_EQ(f.node, "node-b");
  EXPECT_FALSE(f.deleting);
  EXPECT_TRUE(f.state.empty());
  EXPECT_EQ(kube::Name(*found.pods[0]), "j-worker-1");
  EXPECT_FALSE(found.force[0]);
  ASSERT_EQ(found.stuck.size(), 1u);
  EXPECT_EQ(found.stuck[0].reason, FailureReason::kImagePullBackOff);
  EXPECT_EQ(found.stuck[0].message, "no image");
  EXPECT_EQ(found.wait, std::nullopt);
}

TEST(FailedReplicasTest, ADisruptionDeletionIsDecidedOnce) {
  const api::TrainingJob job = Job(0, 1);
  ReplicaObjects pods;
  pods[{ReplicaType::kWorker, 0}] =
      WorkerPod(0,
                {{"conditions", Json::array({{{"type", "DisruptionTarget"},
                                              {"status", "True"},
                                              {"reason", "PreemptionByScheduler"},
                                              {"message", "preempting"}}})}},
                /*deleting=*/true);
  FailedReplicas found = FindFailedReplicas(job, pods, {}, nullptr, std::nullopt, kNow);
  ASSERT_EQ(found.failed.size(), 1u);
  EXPECT_EQ(found.failed[0].reason, FailureReason::kPreempted);
  EXPECT_TRUE(found.failed[0].deleting);
  EXPECT_EQ(found.failed[0].state, "is being deleted by the control plane");
  // Once lastFailure names the pod's uid, it is not decided again.
  api::JobStatus status;
  status.last_failure = api::LastFailure{};
  status.last_failure->pod_uid = "Pod-worker-0";
  EXPECT_TRUE(FindFailedReplicas(job, pods, status, nullptr, std::nullopt, kNow).failed.empty());
  // A pod deleted by someone else, with no disruption said, is not a failure.
  pods[{ReplicaType::kWorker, 0}] = WorkerPod(0, {}, /*deleting=*/true);
  EXPECT_TRUE(FindFailedReplicas(job, pods, {}, nullptr, std::nullopt, kNow).failed.empty());
}

kube::ObjectPtr NodeB(const std::string& ready, int since_seconds_ago) {
  return std::make_shared<const Json>(
      Json{{"metadata", {{"name", "node-b"}, {"creationTimestamp", Ago(9000)}}},
           {"status",
            {{"conditions", Json::array({{{"type", "Ready"},
                                          {"status", ready},
                                          {"reason", "NodeStatusUnknown"},
                                          {"lastTransitionTime", Ago(since_seconds_ago)}}})}}}});
}

TEST(FailedReplicasTest, APodOnALostNodeIsForceDeleted) {
  const api::TrainingJob job = Job(0, 1);
  ReplicaObjects pods;
  pods[{ReplicaType::kWorker, 0}] = WorkerPod(0, {{"phase", "Running"}});
  kube::ObjectCache nodes;
  nodes.Upsert(NodeB("Unknown", 45));
  FailedReplicas found = FindFailedReplicas(job, pods, {}, &nodes, absl::Seconds(60), kNow);
  EXPECT_TRUE(found.failed.empty());
  EXPECT_EQ(found.wait, absl::Seconds(15));  // when to look again
  nodes.Upsert(NodeB("Unknown", 75));
  found = FindFailedReplicas(job, pods, {}, &nodes, absl::Seconds(60), kNow);
  ASSERT_EQ(found.failed.size(), 1u);
  EXPECT_EQ(found.failed[0].reason, FailureReason::kNodeLost);
  EXPECT_EQ(found.failed[0].state, "was lost with its node");
  EXPECT_TRUE(found.force[0]);
  // Not watching Nodes: not judged.
  EXPECT_TRUE(FindFailedReplicas(job, pods, {}, nullptr, std::nullopt, kNow).failed.empty());
}

TEST(FailedReplicasTest, PodsStuckTerminating) {
  ReplicaObjects pods;
  pods[{ReplicaType::kWorker, 0}] = WorkerPod(0, {{"phase", "Running"}});
  Json going = *WorkerPod(1, {{"phase", "Running"}}, true);
  going["metadata"]["deletionTimestamp"] = Ago(20);
  pods[{ReplicaType::kWorker, 1}] = std::make_shared<const Json>(going);
  Json stuck = *WorkerPod(2, {{"phase", "Running"}}, true);
  stuck["metadata"]["deletionTimestamp"] = Ago(70);
  pods[{ReplicaType::kWorker, 2}] = std::make_shared<const Json>(stuck);
  const StuckTerminating found = FindStuckTerminating(pods, absl::Seconds(60), kNow);
  ASSERT_EQ(found.pods.size(), 1u);
  EXPECT_EQ(kube::Name(*found.pods[0]), "j-worker-2");
  EXPECT_EQ(found.wait, absl::Seconds(40));
}

}  // namespace
}  // namespace kubetrain::controller
