#include "runtime/exchange/allreduce/bucket_plan.h"

#include "gtest/gtest.h"

namespace kubetrain::allreduce {
namespace {

TEST(BucketPlan, BucketsTileTheBufferFromItsEnd) {
  BucketPlan plan(10, 4);
  ASSERT_EQ(plan.buckets().size(), 3u);
  EXPECT_EQ(plan.buckets()[0].offset, 6);
  EXPECT_EQ(plan.buckets()[0].length, 4);
  EXPECT_EQ(plan.buckets()[1].offset, 2);
  EXPECT_EQ(plan.buckets()[2].offset, 0);
  EXPECT_EQ(plan.buckets()[2].length, 2);
}

TEST(BucketPlan, ABucketIsReadyOnceBackwardReachesItsStart) {
  BucketPlan plan(10, 4);
  EXPECT_EQ(plan.ReadyCount(10), 0);
  EXPECT_EQ(plan.ReadyCount(7), 0);
  EXPECT_EQ(plan.ReadyCount(6), 1);
  EXPECT_EQ(plan.ReadyCount(3), 1);
  EXPECT_EQ(plan.ReadyCount(0), 3);
}

TEST(BucketPlan, EmptyAndHugeBuckets) {
  EXPECT_TRUE(BucketPlan(0, 4).buckets().empty());
  BucketPlan one(5, 1 << 20);
  ASSERT_EQ(one.buckets().size(), 1u);
  EXPECT_EQ(one.buckets()[0].length, 5);
}

}  // namespace
}  // namespace kubetrain::allreduce
