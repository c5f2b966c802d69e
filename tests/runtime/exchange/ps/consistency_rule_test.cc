// Unit tests of the parameter server's consistency rules on their own:
// which pushes each mode accepts, drops or refuses, when a pull may read,
// and how many gradients make a sync update.
#include "runtime/exchange/ps/consistency_rule.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/exchange/ps/async_rule.h"
#include "runtime/exchange/ps/ssp_rule.h"
#include "runtime/exchange/ps/sync_rule.h"

namespace kubetrain::ps {
namespace {

using ::testing::HasSubstr;

TEST(SyncRule, PushMustBeForTheGlobalStep) {
  SyncRule rule(/*num_workers=*/3, /*replicas_to_aggregate=*/0);
  // The worker's own clock plays no part: only the global step counts.
  EXPECT_EQ(rule.JudgePush(5, /*worker_clock=*/0, /*global_step=*/5).kind, PushVerdict::kAccept);
  EXPECT_EQ(rule.JudgePush(4, 9, 5).kind, PushVerdict::kStale);
  const PushVerdict future = rule.JudgePush(6, 6, 5);
  EXPECT_EQ(future.kind, PushVerdict::kFuture);
  EXPECT_THAT(future.reason, HasSubstr("global step is 5"));
}

TEST(SyncRule, PullWaitsForTheRequestedStep) {
  SyncRule rule(2, 0);
  EXPECT_FALSE(rule.MayPull(/*min_step=*/4, /*clock=*/4, ShardClocks{3, 0}));
  EXPECT_TRUE(rule.MayPull(4, 4, ShardClocks{4, 0}));
  EXPECT_TRUE(rule.MayPull(4, 4, ShardClocks{7, 0}));
}

TEST(SyncRule, EveryWorkerReportsTheGlobalStep) {
  SyncRule rule(2, 0);
  EXPECT_TRUE(rule.lockstep());
  EXPECT_EQ(rule.ReportedClock(/*worker_clock=*/1, /*global_step=*/8), 8);
  EXPECT_EQ(rule.Lead(10, 0), 0);
}

TEST(SyncRule, GradientsPerUpdate) {
  // All workers by default, but never more than are still training.
  EXPECT_EQ(SyncRule(4, 0).GradientsPerUpdate(4), 4);
  EXPECT_EQ(SyncRule(4, 0).GradientsPerUpdate(2), 2);
  // Backup workers: aggregate 3 of 4.
  EXPECT_EQ(SyncRule(4, 3).GradientsPerUpdate(4), 3);
  EXPECT_EQ(SyncRule(4, 3).GradientsPerUpdate(1), 1);
  // Never zero, even with every worker done.
  EXPECT_EQ(SyncRule(4, 0).GradientsPerUpdate(0), 1);
}

TEST(AsyncRule, PushMustBeForTheWorkersOwnClock) {
  AsyncRule rule;
  EXPECT_EQ(rule.JudgePush(3, /*worker_clock=*/3, /*global_step=*/40).kind, PushVerdict::kAccept);
  EXPECT_EQ(rule.JudgePush(2, 3, 40).kind, PushVerdict::kStale);
  const PushVerdict future = rule.JudgePush(4, 3, 0);
  EXPECT_EQ(future.kind, PushVerdict::kFuture);
  EXPECT_THAT(future.reason, HasSubstr("its clock is 3"));
}

TEST(AsyncRule, PullNeverWaitsAndEachGradientIsAnUpdate) {
  AsyncRule rule;
  EXPECT_TRUE(rule.MayPull(100, 100, ShardClocks{0, 0}));
  EXPECT_FALSE(rule.lockstep());
  EXPECT_EQ(rule.GradientsPerUpdate(8), 1);
  EXPECT_EQ(rule.ReportedClock(3, 40), 3);
  EXPECT_EQ(rule.Lead(100, 0), 0);
}

TEST(SspRule, PushesAsInAsync) {
  SspRule rule(2);
  EXPECT_EQ(rule.JudgePush(3, 3, 40).kind, PushVerdict::kAccept);
  EXPECT_EQ(rule.JudgePush(2, 3, 40).kind, PushVerdict::kStale);
  EXPECT_EQ(rule.JudgePush(4, 3, 40).kind, PushVerdict::kFuture);
  EXPECT_FALSE(rule.lockstep());
  EXPECT_EQ(rule.ReportedClock(3, 40), 3);
}

TEST(SspRule, PullWaitsWhileMoreThanTheBoundAhead) {
  SspRule rule(2);
  // The global step does not matter, only the lead over the slowest worker.
  EXPECT_TRUE(rule.MayPull(0, /*clock=*/5, ShardClocks{/*global_step=*/0, /*min_active=*/3}));
  EXPECT_FALSE(rule.MayPull(0, 6, ShardClocks{100, 3}));
  EXPECT_TRUE(rule.MayPull(0, 6, ShardClocks{0, 4}));
  EXPECT_EQ(rule.Lead(6, 3), 3);
  // Bound 0 is lockstep pacing without averaging.
  EXPECT_TRUE(SspRule(0).MayPull(0, 3, ShardClocks{0, 3}));
  EXPECT_FALSE(SspRule(0).MayPull(0, 4, ShardClocks{0, 3}));
}

TEST(MakeConsistencyRule, OneRulePerMode) {
  ExchangeMode sync;
  EXPECT_TRUE(MakeConsistencyRule(sync, 2, 0)->lockstep());
  ExchangeMode async{ExchangeMode::kAsync, 0};
  std::unique_ptr<ConsistencyRule> a = MakeConsistencyRule(async, 2, 0);
  EXPECT_FALSE(a->lockstep());
  EXPECT_TRUE(a->MayPull(0, 50, ShardClocks{0, 0}));
  ExchangeMode ssp{ExchangeMode::kSsp, 1};
  std::unique_ptr<ConsistencyRule> s = MakeConsistencyRule(ssp, 2, 0);
  EXPECT_FALSE(s->lockstep());
  EXPECT_FALSE(s->MayPull(0, 2, ShardClocks{0, 0}));
  EXPECT_TRUE(s->MayPull(0, 1, ShardClocks{0, 0}));
}

}  // namespace
}  // namespace kubetrain::ps
