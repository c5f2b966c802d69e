// The one job token check: equal tokens pass, any difference (a byte, the
// length, none presented) fails with Unauthenticated, and a server without a
// token accepts anyone.
#include "runtime/exchange/job_token.h"

#include <gtest/gtest.h>

namespace kubetrain::exchange {
namespace {

TEST(JobTokenTest, AcceptsOnlyTheSameToken) {
  EXPECT_TRUE(JobTokenAccepted("abc", "abc"));
  EXPECT_FALSE(JobTokenAccepted("abc", "abd"));
  EXPECT_FALSE(JobTokenAccepted("abc", "abcd"));
  EXPECT_FALSE(JobTokenAccepted("abc", ""));
  EXPECT_TRUE(JobTokenAccepted("", "anything")) << "no token configured";
  EXPECT_TRUE(JobTokenAccepted("", ""));
}

TEST(JobTokenTest, OneErrorForEveryServer) {
  const absl::Status s = WrongJobTokenError();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(s.message(), "missing or wrong job token (KUBETRAIN_JOB_TOKEN)");
}

}  // namespace
}  // namespace kubetrain::exchange
