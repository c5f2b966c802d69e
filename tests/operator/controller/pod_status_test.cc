// Pod status readings, without an API server: phase, readiness, restarts, and
// how a failed pod ended (exit codes, eviction -> 137).
#include "operator/controller/pod_status.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace kubetrain::controller {
namespace {

using kube::Json;

Json PodWithContainer(const Json& status) {
  return Json{
      {"spec", {{"containers", Json::array({{{"name", "kubetrain"}}, {{"name", "side"}}})}}},
      {"status", status}};
}

Json Terminated(const std::string& container, int code, const std::string& reason,
                const char* which = "state") {
  Json t{{"exitCode", code}};
  if (!reason.empty()) t["reason"] = reason;
  return Json{{"name", container}, {which, {{"terminated", t}}}};
}

TEST(PodStatusTest, PhaseAndReadiness) {
  EXPECT_EQ(PodPhase(Json::object()), "");
  EXPECT_EQ(PodPhase(Json{{"status", {{"phase", "Running"}}}}), "Running");
  EXPECT_FALSE(PodReady(Json::object()));
  EXPECT_FALSE(PodReady(Json{{"status", {{"conditions", "not a list"}}}}));
  EXPECT_FALSE(PodReady(
      Json{{"status", {{"conditions", Json::array({{{"type", "Ready"}, {"status", "False"}}})}}}}));
  EXPECT_TRUE(
      PodReady(Json{{"status",
                     {{"conditions", Json::array({{{"type", "PodScheduled"}, {"status", "True"}},
                                                  {{"type", "Ready"}, {"status", "True"}}})}}}}));
}

TEST(PodStatusTest, RestartsSumOverContainers) {
  EXPECT_EQ(ContainerRestarts(Json::object()), 0);
  EXPECT_EQ(ContainerRestarts(Json{{"status", {{"containerStatuses", Json::array()}}}}), 0);
  EXPECT_EQ(
      ContainerRestarts(Json{{"status",
                              {{"containerStatuses", Json::array({{{"restartCount", 2}},
                                                                  {{"restartCount", 3}},
                                                                  {{"restartCount", "x"}}})}}}}),
      5);
}

TEST(PodStatusTest, ExitCodeOfTheReplicaContainer) {
  std::string detail;
  // The sidecar's exit does not count: the first container runs the replica.
  Json pod = PodWithContainer(
      {{"containerStatuses",
        Json::array({Terminated("side", 0, "Completed"), Terminated("kubetrain", 3, "Error")})}});
  api::ReplicaExit exit = FailedPodExit(pod, &detail);
  EXPECT_EQ(exit.EffectiveCode(), 3);
  EXPECT_EQ(detail, " (Error)");
}

TEST(PodStatusTest, LastStateWhenTheContainerRestarted) {
  std::string detail;
  Json pod =
      PodWithContainer({{"containerStatuses",
                         Json::array({Terminated("kubetrain", 137, "OOMKilled", "lastState")})}});
  EXPECT_EQ(FailedPodExit(pod, &detail).EffectiveCode(), 137);
  EXPECT_EQ(detail, " (OOMKilled)");
}

TEST(PodStatusTest, NodeKilledPodsAreRetryable137) {
  for (const char* reason :
       {"Evicted", "Preempting", "Shutdown", "NodeShutdown", "Terminated", "NodeLost"}) {
    std::string detail;
    Json pod = PodWithContainer({{"phase", "Failed"}, {"reason", reason}});
    api::ReplicaExit exit = FailedPodExit(pod, &detail);
    EXPECT_EQ(exit.EffectiveCode(), 137) << reason;
    EXPECT_EQ(detail, absl::StrCat(" (pod ", reason, ")"));
  }
}

TEST(PodStatusTest, UnknownFailureIsPermanent) {
  std::string detail;
  EXPECT_EQ(FailedPodExit(PodWithContainer({{"phase", "Failed"}}), &detail).EffectiveCode(), 1);
  EXPECT_EQ(detail, " (no exit code reported)");
  EXPECT_EQ(FailedPodExit(PodWithContainer({{"phase", "Failed"}, {"reason", "DeadlineExceeded"}}),
                          &detail)
                .EffectiveCode(),
            1);
  EXPECT_EQ(detail, " (pod DeadlineExceeded)");
}

// Failure classification from pod statuses in the shape a real kubelet and
// control plane (v1.26+) write them: the container statuses the kubelet
// reports when a container ends (terminated: exitCode, reason Error or
// OOMKilled, the termination message), the pod-level reason and message
// the kubelet's eviction manager and the activeDeadlineSeconds check set,
// the DisruptionTarget condition the scheduler's preemption, the taint
// manager, pod GC and the eviction API add before they delete a pod, and
// the waiting reasons of a container that cannot start. The messages are
// those Kubernetes writes (pkg/kubelet/eviction, pkg/scheduler,
// pkg/controller/tainteviction).
Json KubeletPod(const Json& status) {
  Json pod = PodWithContainer(status);
  pod["spec"]["nodeName"] = "node-b";
  return pod;
}

Json Ended(int code, const std::string& reason, const std::string& message = "") {
  Json t{{"exitCode", code},
         {"reason", reason},
         {"startedAt", "2026-11-27T07:00:00Z"},
         {"finishedAt", "2026-11-27T07:10:00Z"},
         {"containerID", "containerd://0123"}};
  if (!message.empty()) t["message"] = message;
  return Json{{"name", "kubetrain"},         {"state", {{"terminated", t}}},
              {"lastState", Json::object()}, {"ready", false},
              {"restartCount", 0},           {"image", "kubetrain:0.1.0"}};
}

Json Condition(const std::string& type, const std::string& reason, const std::string& message) {
  return Json{{"type", type},
              {"status", "True"},
              {"reason", reason},
              {"message", message},
              {"lastTransitionTime", "2026-11-27T07:09:58Z"}};
}

TEST(ClassifyFailedPod, OomKilledIsTheContainersReason) {
  const PodFailure f = ClassifyFailedPod(KubeletPod(
      {{"phase", "Failed"}, {"containerStatuses", Json::array({Ended(137, "OOMKilled")})}}));
  EXPECT_EQ(f.reason, api::FailureReason::kOomKilled);
  EXPECT_EQ(f.exit.EffectiveCode(), 137);
  EXPECT_EQ(f.node, "node-b");
  EXPECT_FALSE(api::IsDisruption(f.reason));
}

TEST(ClassifyFailedPod, TheKubeletsEvictionIsADisruption) {
  const PodFailure f = ClassifyFailedPod(KubeletPod(
      {{"phase", "Failed"},
       {"reason", "Evicted"},
       {"message",
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 91Mi. "
        "Container kubetrain was using 1805Mi, request is 1Gi, has larger consumption of memory."},
       {"conditions", Json::array({Condition("DisruptionTarget", "TerminationByKubelet",
                                             "The node was low on resource: memory.")})},
       {"containerStatuses", Json::array({Ended(137, "Error")})}}));
  EXPECT_EQ(f.reason, api::FailureReason::kEvicted);
  EXPECT_TRUE(api::IsDisruption(f.reason));
  EXPECT_EQ(f.message, "The node was low on resource: memory.");
  // Before DisruptionTarget (older clusters): the pod's own reason.
  const PodFailure old = ClassifyFailedPod(KubeletPod(
      {{"phase", "Failed"}, {"reason", "Evicted"}, {"message", "The node was low on memory."}}));
  EXPECT_EQ(old.reason, api::FailureReason::kEvicted);
  EXPECT_EQ(old.message, "The node was low on memory.");
}

TEST(ClassifyFailedPod, PreemptionAndALostNodeAreDisruptions) {
  const PodFailure preempted = ClassifyFailedPod(KubeletPod(
      {{"phase", "Failed"},
       {"conditions", Json::array({Condition("DisruptionTarget", "PreemptionByScheduler",
                                             "kube-scheduler: preempting to accommodate a higher "
                                             "priority pod")})},
       {"containerStatuses", Json::array({Ended(143, "Error")})}}));
  EXPECT_EQ(preempted.reason, api::FailureReason::kPreempted);
  EXPECT_EQ(preempted.exit.EffectiveCode(), 143);
  const PodFailure tainted = ClassifyFailedPod(
      KubeletPod({{"phase", "Failed"},
                  {"conditions",
                   Json::array({Condition("DisruptionTarget", "DeletionByTaintManager",
                                          "Taint manager: deleting due to NoExecute taint")})}}));
  EXPECT_EQ(tainted.reason, api::FailureReason::kNodeLost);
  const PodFailure lost = ClassifyFailedPod(
      KubeletPod({{"phase", "Failed"},
                  {"reason", "NodeLost"},
                  {"message", "Node node-b which was running pod job-worker-1 is unresponsive"}}));
  EXPECT_EQ(lost.reason, api::FailureReason::kNodeLost);
  EXPECT_TRUE(api::IsDisruption(lost.reason));
}

TEST(ClassifyFailedPod, TheRuntimesOwnExitsAndLines) {
  const PodFailure peer = ClassifyFailedPod(KubeletPod(
      {{"phase", "Failed"},
       {"containerStatuses",
        Json::array({Ended(129, "Error", "kubetrain: error: worker-1: lost ps-0: ...")})}}));
  EXPECT_EQ(peer.reason, api::FailureReason::kLostPeer);
  const PodFailure config = ClassifyFailedPod(KubeletPod(
      {{"phase", "Failed"},
       {"containerStatuses",
        Json::array(
            {Ended(1, "Error", "kubetrain: error: unknown model 'xyz' (known: cnn, mlp)\n")})}}));
  EXPECT_EQ(config.reason, api::FailureReason::kConfigError);
  EXPECT_EQ(config.message, "kubetrain: error: unknown model 'xyz' (known: cnn, mlp)");
  EXPECT_FALSE(api::IsDisruption(config.reason));
  // Exit 2 of something else (a shell, a crash's log tail): an Error.
  const PodFailure other = ClassifyFailedPod(
      KubeletPod({{"phase", "Failed"},
                  {"containerStatuses", Json::array({Ended(2, "Error", "Segmentation fault")})}}));
  EXPECT_EQ(other.reason, api::FailureReason::kError);
  EXPECT_EQ(other.message, "Segmentation fault");
  const PodFailure deadline = ClassifyFailedPod(
      KubeletPod({{"phase", "Failed"},
                  {"reason", "DeadlineExceeded"},
                  {"message", "Pod was active on the node longer than the specified deadline"}}));
  EXPECT_EQ(deadline.reason, api::FailureReason::kDeadlineExceeded);
}

TEST(ClassifyFailedPod, ALongMessageKeepsItsEnd) {
  const std::string log(5000, 'x');
  const PodFailure f = ClassifyFailedPod(
      KubeletPod({{"phase", "Failed"},
                  {"containerStatuses", Json::array({Ended(3, "Error", log + "the last line")})}}));
  EXPECT_EQ(f.message.size(), PodFailure::kMaxMessage);
  EXPECT_TRUE(f.message.ends_with("the last line"));
  EXPECT_TRUE(f.message.starts_with("..."));
}

Json Waiting(const std::string& reason, const std::string& message) {
  return Json{{"name", "kubetrain"},
              {"state", {{"waiting", {{"reason", reason}, {"message", message}}}}},
              {"ready", false},
              {"restartCount", 0}};
}

TEST(StuckPodFailure, AnImageOrASecretThatWillNotCome) {
  const std::optional<PodFailure> image = StuckPodFailure(KubeletPod(
      {{"phase", "Pending"},
       {"containerStatuses",
        Json::array({Waiting("ImagePullBackOff", "Back-off pulling image \"kubetrain:nope\"")})}}));
  ASSERT_TRUE(image.has_value());
  EXPECT_EQ(image->reason, api::FailureReason::kImagePullBackOff);
  EXPECT_EQ(image->message, "Back-off pulling image \"kubetrain:nope\"");
  const std::optional<PodFailure> secret = StuckPodFailure(KubeletPod(
      {{"phase", "Pending"},
       {"containerStatuses",
        Json::array({Waiting("CreateContainerConfigError", "secret \"job-token\" not found")})}}));
  ASSERT_TRUE(secret.has_value());
  EXPECT_EQ(secret->reason, api::FailureReason::kCreateContainerConfigError);
  // Starting is not stuck.
  EXPECT_FALSE(StuckPodFailure(KubeletPod({{"phase", "Pending"},
                                           {"containerStatuses",
                                            Json::array({Waiting("ContainerCreating", "")})}}))
                   .has_value());
  EXPECT_FALSE(StuckPodFailure(KubeletPod({{"phase", "Pending"}})).has_value());
}

}  // namespace
}  // namespace kubetrain::controller
