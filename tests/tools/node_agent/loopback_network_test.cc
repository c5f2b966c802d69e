#include "tools/node_agent/loopback_network.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/tools/node_agent/fake_port_allocator.h"

namespace kubetrain::node_agent {
namespace {

using ::testing::Contains;
using ::testing::Pair;

TEST(LoopbackNetworkTest, PodsShareLoopbackAndEachGetsItsOwnStableMetricsPort) {
  FakePortAllocator ports;
  LoopbackNetwork network(ports);
  ASSERT_TRUE(network.Init().ok());
  absl::StatusOr<PodAttachment> a = network.Attach("team/a", "uid-1");
  absl::StatusOr<PodAttachment> b = network.Attach("team/b", "uid-2");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->ip, "127.0.0.1");
  EXPECT_EQ(b->ip, "127.0.0.1");
  EXPECT_TRUE(a->netns.empty());
  EXPECT_TRUE(a->host_link.empty());
  EXPECT_TRUE(a->exec_prefix.empty());
  EXPECT_NE(a->metrics_port, 0);
  EXPECT_NE(a->metrics_port, b->metrics_port);
  // A new pod of the same name (the operator replaced it) keeps the port.
  ASSERT_TRUE(network.Detach(*a).ok());
  absl::StatusOr<PodAttachment> again = network.Attach("team/a", "uid-3");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->metrics_port, a->metrics_port);
  EXPECT_TRUE(network.WriteHosts(*a, "ignored").ok());
}

TEST(LoopbackNetworkTest, TheEnvironmentNamesLoopbackPortsAndTheMetricsPort) {
  FakePortAllocator ports;
  LoopbackNetwork network(ports);
  absl::StatusOr<PodAttachment> a = network.Attach("team/j-worker-0", "u");
  ASSERT_TRUE(a.ok());
  absl::StatusOr<api::EnvList> env = network.RewriteEnvironment(
      *a, "team", {}, {{"KUBETRAIN_PS_HOSTS", "j-ps-0.team.svc:2222"}, {"X", "y"}});
  ASSERT_TRUE(env.ok()) << env.status();
  const int ps = network.endpoints().allocated().at({"team", "j-ps-0", 2222});
  EXPECT_THAT(*env, Contains(Pair("KUBETRAIN_PS_HOSTS", absl::StrCat("127.0.0.1:", ps))));
  EXPECT_THAT(*env, Contains(Pair("X", "y")));
  EXPECT_THAT(*env, Contains(Pair("KUBETRAIN_METRICS_PORT", absl::StrCat(a->metrics_port))));
  // A container's own metrics port is replaced; metrics turned off stay off.
  env = network.RewriteEnvironment(*a, "team", {}, {{"KUBETRAIN_METRICS_PORT", "9000"}});
  ASSERT_TRUE(env.ok());
  EXPECT_THAT(
      *env, ::testing::ElementsAre(Pair("KUBETRAIN_METRICS_PORT", absl::StrCat(a->metrics_port))));
  env = network.RewriteEnvironment(*a, "team", {}, {{"KUBETRAIN_METRICS_PORT", "0"}});
  ASSERT_TRUE(env.ok());
  EXPECT_THAT(*env, ::testing::ElementsAre(Pair("KUBETRAIN_METRICS_PORT", "0")));
}

TEST(LoopbackNetworkTest, NoPortForTheMetricsServerFailsTheAttachment) {
  FakePortAllocator ports;
  ports.left = 0;
  LoopbackNetwork network(ports);
  absl::StatusOr<PodAttachment> a = network.Attach("team/a", "u");
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(std::string(a.status().message()), ::testing::HasSubstr("team/a"));
}

}  // namespace
}  // namespace kubetrain::node_agent
