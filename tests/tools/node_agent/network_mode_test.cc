#include "tools/node_agent/network_mode.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>

namespace kubetrain::node_agent {
namespace {

using ::testing::HasSubstr;

TEST(NetworkModeTest, ParsesTheThreeModesAndNamesThemOnABadOne) {
  EXPECT_EQ(ParseNetworkMode("auto").value(), NetworkMode::kAuto);
  EXPECT_EQ(ParseNetworkMode("netns").value(), NetworkMode::kNetns);
  EXPECT_EQ(ParseNetworkMode("loopback").value(), NetworkMode::kLoopback);
  absl::StatusOr<NetworkMode> bad = ParseNetworkMode("host");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("auto, netns or loopback"));
}

TEST(NetworkModeTest, AutoFallsBackToLoopbackOnlyWithoutPermissionAndSaysWhy) {
  const absl::Status denied =
      absl::PermissionDeniedError("unshare(CLONE_NEWNET): Operation not permitted");
  NetworkChoice choice = ChooseNetwork(NetworkMode::kAuto, denied);
  EXPECT_TRUE(choice.loopback);
  EXPECT_THAT(choice.notice, HasSubstr("no permission for network namespaces"));
  EXPECT_THAT(choice.notice, HasSubstr("Operation not permitted"));
  EXPECT_THAT(choice.notice, HasSubstr("falling back to loopback"));
  EXPECT_THAT(choice.notice, HasSubstr("127.0.0.1"));

  choice = ChooseNetwork(NetworkMode::kAuto, absl::OkStatus());
  EXPECT_FALSE(choice.loopback);
  EXPECT_TRUE(choice.notice.empty());
  // Forced modes ignore the probe.
  EXPECT_FALSE(ChooseNetwork(NetworkMode::kNetns, denied).loopback);
  choice = ChooseNetwork(NetworkMode::kLoopback, absl::OkStatus());
  EXPECT_TRUE(choice.loopback);
  EXPECT_THAT(choice.notice, HasSubstr("--network loopback"));
}

// The probe agrees with util-linux's `unshare --net true` run as this user.
TEST(NetworkModeTest, TheProbeAgreesWithUnshare) {
  const absl::Status probe = ProbeNetworkNamespaces();
  EXPECT_TRUE(probe.ok() || probe.code() == absl::StatusCode::kPermissionDenied) << probe;
  const int rc = std::system("unshare --net true 2>/dev/null");
  if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) == 127) {
    GTEST_SKIP() << "no unshare(1) to compare with";
  }
  EXPECT_EQ(probe.ok(), WEXITSTATUS(rc) == 0) << probe;
}

}  // namespace
}  // namespace kubetrain::node_agent
