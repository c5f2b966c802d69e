// When a replica's node counts as lost, from Node and Pod objects shaped as a
// real cluster has them: the node lifecycle controller turns Ready to
// Unknown (reason NodeStatusUnknown, "Kubelet stopped posting node
// status.") once heartbeats stop; a graceful deletion leaves the pod with a
// deletionTimestamp at the end of its grace period until its kubelet
// confirms.
#include "operator/controller/node_loss.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kubetrain::controller {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

const absl::Time kNow = absl::FromUnixSeconds(1795000000);
const absl::Duration kTimeout = absl::Seconds(60);

std::string Ago(int seconds) {
  return kube::FormatTime(absl::ToUnixMicros(kNow - absl::Seconds(seconds)));
}

Json Node(const std::string& status, int since_seconds_ago, const std::string& reason = "",
          const std::string& message = "") {
  Json ready{{"type", "Ready"}, {"status", status}, {"lastTransitionTime", Ago(since_seconds_ago)}};
  if (!reason.empty()) ready["reason"] = reason;
  if (!message.empty()) ready["message"] = message;
  return Json{{"metadata", {{"name", "node-b"}, {"creationTimestamp", Ago(9000)}}},
              {"status", {{"conditions", Json::array({ready})}}}};
}

Json Pod(const std::string& phase = "Running") {
  return Json{{"metadata", {{"name", "job-worker-1"}}},
              {"spec", {{"nodeName", "node-b"}}},
              {"status", {{"phase", phase}}}};
}

TEST(NodeLoss, AReadyNodeLosesNothing) {
  const Json node = Node("True", 500);
  const NodeLossCheck c = CheckNodeLoss(Pod(), &node, kTimeout, kNow);
  EXPECT_FALSE(c.lost.has_value());
  EXPECT_FALSE(c.stuck_terminating);
  EXPECT_FALSE(c.wait.has_value());
  EXPECT_TRUE(NodeReady(node));
}

TEST(NodeLoss, NotReadyLessThanTheTimeoutSaysWhenToLookAgain) {
  const Json node = Node("Unknown", 45, "NodeStatusUnknown");
  const NodeLossCheck c = CheckNodeLoss(Pod(), &node, kTimeout, kNow);
  EXPECT_FALSE(c.lost.has_value());
  ASSERT_TRUE(c.wait.has_value());
  EXPECT_EQ(*c.wait, absl::Seconds(15));
  EXPECT_FALSE(NodeReady(node));
}

TEST(NodeLoss, NotReadyPastTheTimeoutIsANodeLostDisruption) {
  const Json node =
      Node("Unknown", 75, "NodeStatusUnknown", "Kubelet stopped posting node status.");
  const NodeLossCheck c = CheckNodeLoss(Pod(), &node, kTimeout, kNow);
  ASSERT_TRUE(c.lost.has_value());
  EXPECT_EQ(c.lost->reason, api::FailureReason::kNodeLost);
  EXPECT_TRUE(api::IsDisruption(c.lost->reason));
  EXPECT_EQ(c.lost->node, "node-b");
  EXPECT_EQ(c.lost->message,
            "node node-b has not been Ready for 75 s (Ready=Unknown, NodeStatusUnknown): Kubelet "
            "stopped posting node status.");
  // NotReady from the kubelet itself counts the same.
  const Json not_ready = Node("False", 61, "KubeletNotReady", "container runtime is down");
  EXPECT_TRUE(CheckNodeLoss(Pod(), &not_ready, kTimeout, kNow).lost.has_value());
}

TEST(NodeLoss, AGoneNodeIsLostAtOnce) {
  const NodeLossCheck c = CheckNodeLoss(Pod(), nullptr, kTimeout, kNow);
  ASSERT_TRUE(c.lost.has_value());
  EXPECT_THAT(c.lost->message, HasSubstr("node node-b is gone"));
}

TEST(NodeLoss, UnboundAndFinishedPodsAreNeverLost) {
  Json pending = Pod("Pending");
  pending["spec"].erase("nodeName");
  EXPECT_FALSE(CheckNodeLoss(pending, nullptr, kTimeout, kNow).lost.has_value());
  const Json node = Node("Unknown", 500);
  EXPECT_FALSE(CheckNodeLoss(Pod("Succeeded"), &node, kTimeout, kNow).lost.has_value());
  EXPECT_FALSE(CheckNodeLoss(Pod("Failed"), &node, kTimeout, kNow).lost.has_value());
}

TEST(NodeLoss, APodTerminatingPastItsGracePeriodAndTheTimeoutIsStuck) {
  Json pod = Pod();
  pod["metadata"]["deletionTimestamp"] = Ago(30);  // grace period ended 30 s ago
  NodeLossCheck c = CheckNodeLoss(pod, nullptr, kTimeout, kNow);
  EXPECT_FALSE(c.stuck_terminating);
  EXPECT_FALSE(c.lost.has_value()) << "a pod being deleted is not a new failure";
  ASSERT_TRUE(c.wait.has_value());
  EXPECT_EQ(*c.wait, absl::Seconds(30));
  pod["metadata"]["deletionTimestamp"] = Ago(61);
  c = CheckNodeLoss(pod, nullptr, kTimeout, kNow);
  EXPECT_TRUE(c.stuck_terminating);
  EXPECT_FALSE(c.wait.has_value());
}

}  // namespace
}  // namespace kubetrain::controller
