// The runtime's allreduce world as the progress poller reads it from the
// chief's metrics page, and the MembershipChanged event's message.
#include "operator/controller/world_membership.h"

#include <gtest/gtest.h>

#include "api/labels.h"

namespace kubetrain::controller {
namespace {

using Json = nlohmann::json;

Json ChiefPod() {
  return {{"metadata",
           {{"name", "j-worker-0"},
            {"namespace", "ns"},
            {"labels", {{api::kLabelReplicaType, "worker"}, {api::kLabelReplicaIndex, "0"}}}}}};
}

PrometheusExposition Page(const std::string& text) {
  absl::StatusOr<PrometheusExposition> page = ParsePrometheusText(text);
  EXPECT_TRUE(page.ok()) << page.status();
  return page.ok() ? *page : PrometheusExposition{};
}

constexpr char kLabels[] =
    R"(training_job="j",training_namespace="ns",replica_type="worker",replica_index="0")";

TEST(WorldMembershipTest, ReadsSizeGenerationAndMembers) {
  const std::string l = kLabels;
  const PrometheusExposition page = Page(
      "# TYPE kubetrain_world_size gauge\n"
      "kubetrain_world_size{" +
      l +
      "} 3\n"
      "# TYPE kubetrain_world_generation gauge\n"
      "kubetrain_world_generation{" +
      l +
      "} 4\n"
      "# TYPE kubetrain_world_member gauge\n"
      "kubetrain_world_member{" +
      l +
      ",member=\"worker-0\"} 1\n"
      "kubetrain_world_member{" +
      l +
      ",member=\"worker-1\"} 1\n"
      "kubetrain_world_member{" +
      l +
      ",member=\"worker-3\"} 1\n"
      "kubetrain_world_member{" +
      l +
      ",member=\"worker-2\"} 0\n"
      // Another job's series on the same page count for nothing.
      "kubetrain_world_size{training_job=\"other\",training_namespace=\"ns\"} 9\n");
  const WorldReading world = WorldFromMetrics(page, ChiefPod(), "j");
  EXPECT_EQ(world.size, 3);
  EXPECT_EQ(world.generation, 4);
  EXPECT_EQ(world.members, (std::set<std::string>{"worker-0", "worker-1", "worker-3"}));
}

TEST(WorldMembershipTest, APageWithoutTheWorldReadsAsNothing) {
  const WorldReading world = WorldFromMetrics(
      Page(std::string("kubetrain_global_step{") + kLabels + "} 7\n"), ChiefPod(), "j");
  EXPECT_EQ(world, WorldReading{});
}

TEST(WorldMembershipTest, JoinedAndLeftFromThePreviousGeneration) {
  const std::set<std::string> before = {"worker-0", "worker-1", "worker-2"};
  const std::set<std::string> after = {"worker-0", "worker-1", "worker-2", "worker-3"};
  MembershipChange change = DiffMembership(4, 1200, 4, &before, after);
  EXPECT_EQ(MembershipChangedMessage(change),
            "generation 4 formed at step 1200: world 4 (joined worker-3)");
  change = DiffMembership(5, 1300, 2, &after, {"worker-0", "worker-3"});
  EXPECT_EQ(MembershipChangedMessage(change),
            "generation 5 formed at step 1300: world 2 (left worker-1, worker-2)");
  const std::set<std::string> swapped = {"worker-0", "worker-4"};
  change = DiffMembership(6, std::nullopt, 2, &swapped, {"worker-0", "worker-5"});
  EXPECT_EQ(MembershipChangedMessage(change),
            "generation 6 formed: world 2 (joined worker-5; left worker-4)");
  // After an operator restart the previous members are unknown.
  EXPECT_EQ(MembershipChangedMessage(DiffMembership(7, 10, 3, nullptr, after)),
            "generation 7 formed at step 10: world 3");
}

}  // namespace
}  // namespace kubetrain::controller
