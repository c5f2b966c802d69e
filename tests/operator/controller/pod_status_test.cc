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

}  // namespace
}  // namespace kubetrain::controller
