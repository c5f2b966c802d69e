#include "tools/node_agent/pod_fit.h"

#include <gtest/gtest.h>

namespace kubetrain::node_agent {
namespace {

using Json = nlohmann::json;

Json Pod(const std::string& node, const std::string& cpu, const std::string& memory,
         const std::string& phase = "Running") {
  Json pod = Json::parse(R"json({"metadata": {"name": "p", "namespace": "ns"}, "spec": {
      "containers": [{"name": "c", "resources": {"requests": {}}}]}})json");
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  if (!cpu.empty()) pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu;
  if (!memory.empty()) pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = memory;
  pod["status"]["phase"] = phase;
  return pod;
}

TEST(PodFitTest, RequestsSumContainersAndFallBackToLimits) {
  Json pod = Pod("", "500m", "1Gi");
  pod["spec"]["containers"].push_back(Json::parse(
      R"json({"name": "side", "resources": {"limits": {"cpu": "1", "memory": "512Mi"}}})json"));
  absl::StatusOr<Resources> r = PodRequests(pod);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cpu_millis, 1500);
  EXPECT_EQ(r->memory_bytes, (int64_t{1} << 30) + (int64_t{512} << 20));
  EXPECT_EQ(r->pods, 1);
}

TEST(PodFitTest, LargestInitContainerCounts) {
  Json pod = Pod("", "100m", "");
  pod["spec"]["initContainers"] =
      Json::parse(R"json([{"name": "init", "resources": {"requests": {"cpu": "2"}}}])json");
  EXPECT_EQ(PodRequests(pod)->cpu_millis, 2000);
}

TEST(PodFitTest, NumericQuantitiesAreRead) {
  Json pod = Pod("", "", "");
  pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = 2;
  EXPECT_EQ(PodRequests(pod)->cpu_millis, 2000);
}

TEST(PodFitTest, MalformedRequestNamesTheContainer) {
  absl::StatusOr<Resources> r = PodRequests(Pod("", "lots", ""));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("container c requests.cpu"), std::string::npos) << r.status();
}

TEST(PodFitTest, UsedCountsOnlyLivePodsOnThisNode) {
  std::vector<Json> pods = {Pod("n1", "1", "1Gi"), Pod("n1", "2", "1Gi", "Succeeded"),
                            Pod("n2", "4", "1Gi"), Pod("", "8", "1Gi")};
  Resources used = UsedOnNode(pods, "n1");
  EXPECT_EQ(used.cpu_millis, 1000);
  EXPECT_EQ(used.memory_bytes, int64_t{1} << 30);
  EXPECT_EQ(used.pods, 1);
}

TEST(PodFitTest, FitFailureSaysWhatIsShort) {
  const Resources capacity{2000, int64_t{4} << 30, 2};
  EXPECT_EQ(FitFailure(capacity, {1000, 0, 1}, {1000, int64_t{4} << 30, 1}), "");
  const std::string cpu = FitFailure(capacity, {1500, 0, 1}, {1000, 0, 1});
  EXPECT_NE(cpu.find("Insufficient cpu"), std::string::npos) << cpu;
  EXPECT_EQ(cpu.find("memory"), std::string::npos) << cpu;
  const std::string memory =
      FitFailure(capacity, {0, int64_t{3} << 30, 0}, {0, int64_t{2} << 30, 1});
  EXPECT_NE(memory.find("Insufficient memory"), std::string::npos) << memory;
  EXPECT_NE(FitFailure(capacity, {0, 0, 2}, {0, 0, 1}).find("Too many pods"), std::string::npos);
}

// Placement as kube-scheduler's NodeAffinity (nodeSelector),
// NodeUnschedulable and TaintToleration filters decide it.
TEST(PodFitTest, PlacementFollowsSelectorCordonAndTaints) {
  Json node{{"metadata", {{"name", "a"}, {"labels", {{"kubernetes.io/hostname", "a"}}}}},
            {"spec", Json::object()}};
  Json pod{{"spec", Json::object()}};
  EXPECT_EQ(PlacementFailure(pod, node), "");
  pod["spec"]["nodeSelector"] = {{"kubernetes.io/hostname", "b"}};
  EXPECT_EQ(PlacementFailure(pod, node), "node(s) didn't match Pod's node affinity/selector");
  pod["spec"]["nodeSelector"] = {{"kubernetes.io/hostname", "a"}};
  EXPECT_EQ(PlacementFailure(pod, node), "");

  node["spec"]["taints"] =
      Json::array({{{"key", "e2e"}, {"value", "lost"}, {"effect", "NoSchedule"}},
                   {{"key", "soft"}, {"effect", "PreferNoSchedule"}}});
  EXPECT_EQ(PlacementFailure(pod, node), "node(s) had untolerated taint {e2e: lost}");
  pod["spec"]["tolerations"] = Json::array({{{"key", "e2e"}, {"value", "other"}}});
  EXPECT_NE(PlacementFailure(pod, node), "") << "Equal needs the same value";
  pod["spec"]["tolerations"] = Json::array({{{"key", "e2e"}, {"operator", "Exists"}}});
  EXPECT_EQ(PlacementFailure(pod, node), "") << "PreferNoSchedule does not filter";
  pod["spec"]["tolerations"] =
      Json::array({{{"key", "e2e"}, {"value", "lost"}, {"effect", "NoExecute"}}});
  EXPECT_NE(PlacementFailure(pod, node), "") << "another effect";
  pod["spec"]["tolerations"] = Json::array({{{"operator", "Exists"}}});
  EXPECT_EQ(PlacementFailure(pod, node), "") << "an empty key with Exists tolerates all";

  node["spec"] = {{"unschedulable", true}};
  pod["spec"].erase("tolerations");
  EXPECT_EQ(PlacementFailure(pod, node), "node(s) were unschedulable");
}

}  // namespace
}  // namespace kubetrain::node_agent
