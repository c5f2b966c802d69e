// The local cluster's node lifecycle controller: another agent's Node whose
// Lease is older than the grace period is marked Ready=Unknown as
// kube-controller-manager marks it (reason NodeStatusUnknown), once; this
// agent's own Node and nodes no agent runs are left alone.
#include "tools/node_agent/node_monitor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "api/labels.h"
#include "tests/tools/node_agent/fake_node_api.h"

namespace kubetrain::node_agent {
namespace {

using ::testing::ElementsAre;
using Json = nlohmann::json;

const absl::Time kStart = absl::FromUnixSeconds(1800000000);

Json AgentNode(const std::string& name) {
  return Json{{"metadata",
               {{"name", name},
                {"creationTimestamp", kube::FormatTime(absl::ToUnixMicros(kStart))},
                {"labels", {{api::kLabelNodeAgent, "true"}}}}},
              {"status", {{"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
}

Json Lease(const std::string& name, absl::Time renewed) {
  return Json{{"metadata", {{"name", name}, {"namespace", kNodeLeaseNamespace}}},
              {"spec", {{"renewTime", kube::FormatMicroTime(absl::ToUnixMicros(renewed))}}}};
}

class NodeMonitorTest : public ::testing::Test {
 protected:
  NodeMonitorTest() {
    api_.nodes["node-a"] = AgentNode("node-a");
    api_.nodes["node-b"] = AgentNode("node-b");
    api_.nodes["other"] = AgentNode("other");
    api_.nodes["other"]["metadata"].erase("labels");  // not an agent's
    api_.node_leases["node-a"] = Lease("node-a", kStart);
    api_.node_leases["node-b"] = Lease("node-b", kStart);
  }
  std::string Ready(const std::string& node) {
    return api_.nodes[node]["status"]["conditions"][0].value("status", "");
  }

  FakeApi api_;
  kube::NullLogger logger_;
  absl::Time now_ = kStart;
  NodeMonitor monitor_{api_, logger_, "node-a", absl::Seconds(10), [this] { return now_; }};
};

TEST_F(NodeMonitorTest, ANodeWhoseLeaseStoppedIsMarkedUnknownOnce) {
  now_ = kStart + absl::Seconds(9);
  ASSERT_TRUE(monitor_.Check().ok());
  EXPECT_TRUE(api_.node_status_patches.empty()) << "within the grace period";
  now_ = kStart + absl::Seconds(12);
  ASSERT_TRUE(monitor_.Check().ok());
  EXPECT_THAT(api_.node_status_patches, ElementsAre("node-b")) << "not itself, not 'other'";
  const Json& ready = api_.nodes["node-b"]["status"]["conditions"][0];
  EXPECT_EQ(ready["status"], "Unknown");
  EXPECT_EQ(ready["reason"], "NodeStatusUnknown");
  EXPECT_EQ(ready["message"], "Kubelet stopped posting node status.");
  EXPECT_EQ(ready["lastTransitionTime"], kube::FormatTime(absl::ToUnixMicros(now_)));
  EXPECT_EQ(api_.nodes["node-b"]["spec"]["taints"][0]["key"], kTaintUnreachable);
  EXPECT_EQ(api_.nodes["node-b"]["spec"]["taints"][0]["effect"], "NoSchedule");
  now_ += absl::Seconds(5);
  ASSERT_TRUE(monitor_.Check().ok());
  EXPECT_EQ(api_.node_status_patches.size(), 1u) << "already Unknown";
  EXPECT_EQ(Ready("node-a"), "True");
}

TEST_F(NodeMonitorTest, RenewalsKeepANodeAndChecksAreAtMostOneASecond) {
  now_ = kStart + absl::Seconds(20);
  api_.node_leases["node-b"] = Lease("node-b", now_ - absl::Seconds(3));
  ASSERT_TRUE(monitor_.Check().ok());
  EXPECT_TRUE(api_.node_status_patches.empty());
  // The lease stops; a check within the same second does not look again.
  api_.node_leases["node-b"] = Lease("node-b", kStart);
  now_ += absl::Milliseconds(500);
  ASSERT_TRUE(monitor_.Check().ok());
  EXPECT_TRUE(api_.node_status_patches.empty());
  now_ += absl::Milliseconds(600);
  ASSERT_TRUE(monitor_.Check().ok());
  EXPECT_THAT(api_.node_status_patches, ElementsAre("node-b"));
}

TEST_F(NodeMonitorTest, ANodeWithoutALeaseCountsFromItsCreation) {
  api_.node_leases.erase("node-b");
  now_ = kStart + absl::Seconds(11);
  ASSERT_TRUE(monitor_.Check().ok());
  EXPECT_EQ(Ready("node-b"), "Unknown");
}

}  // namespace
}  // namespace kubetrain::node_agent
