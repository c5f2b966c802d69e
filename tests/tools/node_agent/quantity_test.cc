#include "tools/node_agent/quantity.h"

#include <gtest/gtest.h>

namespace kubetrain::node_agent {
namespace {

TEST(QuantityTest, CpuInMillicores) {
  EXPECT_EQ(*ParseCpuMillis("500m"), 500);
  EXPECT_EQ(*ParseCpuMillis("2"), 2000);
  EXPECT_EQ(*ParseCpuMillis("0.5"), 500);
  EXPECT_EQ(*ParseCpuMillis("1.5"), 1500);
}

TEST(QuantityTest, MemoryInBytes) {
  EXPECT_EQ(*ParseBytes("512Mi"), int64_t{512} << 20);
  EXPECT_EQ(*ParseBytes("1Gi"), int64_t{1} << 30);
  EXPECT_EQ(*ParseBytes("129M"), 129000000);
  EXPECT_EQ(*ParseBytes("128974848"), 128974848);
  EXPECT_EQ(*ParseBytes("1e3"), 1000);
  EXPECT_EQ(*ParseBytes("1k"), 1000);
}

TEST(QuantityTest, FractionsRoundUp) {
  EXPECT_EQ(*ParseCpuMillis("0.0001"), 1);
  EXPECT_EQ(*ParseBytes("1.5"), 2);
}

TEST(QuantityTest, MalformedIsAClearError) {
  for (const char* bad : {"", "abc", "1Qi", "-1", "1.2.3Gi", "Mi"}) {
    absl::StatusOr<int64_t> q = ParseBytes(bad);
    ASSERT_FALSE(q.ok()) << bad;
    EXPECT_NE(q.status().message().find("not a Kubernetes quantity"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace kubetrain::node_agent
