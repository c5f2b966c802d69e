#include "operator/kube/rate_limiter.h"

#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "gtest/gtest.h"

namespace kubetrain::kube {
namespace {

TEST(ItemExponentialRateLimiterTest, DoublesPerFailureUpToTheCap) {
  auto limiter = NewItemExponentialRateLimiter(absl::Milliseconds(5), absl::Milliseconds(100));
  EXPECT_EQ(limiter->NumRequeues("a"), 0);
  EXPECT_EQ(limiter->When("a"), absl::Milliseconds(5));
  EXPECT_EQ(limiter->When("a"), absl::Milliseconds(10));
  EXPECT_EQ(limiter->When("a"), absl::Milliseconds(20));
  EXPECT_EQ(limiter->When("a"), absl::Milliseconds(40));
  EXPECT_EQ(limiter->When("a"), absl::Milliseconds(80));
  EXPECT_EQ(limiter->When("a"), absl::Milliseconds(100));
  EXPECT_EQ(limiter->When("a"), absl::Milliseconds(100));
  EXPECT_EQ(limiter->NumRequeues("a"), 7);
}

TEST(ItemExponentialRateLimiterTest, ItemsAreIndependentAndForgetResets) {
  auto limiter = NewItemExponentialRateLimiter(absl::Milliseconds(1), absl::Seconds(1));
  EXPECT_EQ(limiter->When("a"), absl::Milliseconds(1));
  EXPECT_EQ(limiter->When("a"), absl::Milliseconds(2));
  EXPECT_EQ(limiter->When("b"), absl::Milliseconds(1));
  EXPECT_EQ(limiter->NumRequeues("a"), 2);
  EXPECT_EQ(limiter->NumRequeues("b"), 1);

  limiter->Forget("a");
  EXPECT_EQ(limiter->NumRequeues("a"), 0);
  EXPECT_EQ(limiter->NumRequeues("b"), 1);
  EXPECT_EQ(limiter->When("a"), absl::Milliseconds(1));
  limiter->Forget("never-seen");  // Harmless.
}

TEST(ItemExponentialRateLimiterTest, ManyFailuresSaturateWithoutOverflow) {
  auto capped = NewItemExponentialRateLimiter(absl::Milliseconds(5), absl::Seconds(1000));
  auto uncapped = NewItemExponentialRateLimiter(absl::Milliseconds(5), absl::InfiniteDuration());
  absl::Duration previous = absl::ZeroDuration();
  for (int i = 0; i < 2000; ++i) {
    absl::Duration d = capped->When("a");
    EXPECT_GE(d, previous) << "failure " << i;
    EXPECT_LE(d, absl::Seconds(1000)) << "failure " << i;
    previous = d;
    EXPECT_GT(uncapped->When("a"), absl::ZeroDuration()) << "failure " << i;
  }
  EXPECT_EQ(previous, absl::Seconds(1000));
  EXPECT_EQ(uncapped->When("a"), absl::InfiniteDuration());
}

TEST(ItemExponentialRateLimiterTest, CountsEveryFailureFromManyThreads) {
  auto limiter = NewItemExponentialRateLimiter(absl::Milliseconds(1), absl::Seconds(1));
  constexpr int kThreads = 4;
  constexpr int kPerThread = 1000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&limiter, t] {
      for (int i = 0; i < kPerThread; ++i) {
        limiter->When("shared");
        limiter->When(absl::StrCat("own-", t));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(limiter->NumRequeues("shared"), kThreads * kPerThread);
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(limiter->NumRequeues(absl::StrCat("own-", t)), kPerThread);
}

TEST(BucketRateLimiterTest, BurstThenPacedAtQps) {
  FakeClock clock;
  auto limiter = NewBucketRateLimiter(/*qps=*/10, /*burst=*/3, clock);
  // The bucket starts full: the burst passes without waiting.
  EXPECT_EQ(limiter->When("a"), absl::ZeroDuration());
  EXPECT_EQ(limiter->When("b"), absl::ZeroDuration());
  EXPECT_EQ(limiter->When("c"), absl::ZeroDuration());
  // Each further reservation waits one more 1/qps.
  EXPECT_EQ(limiter->When("d"), absl::Milliseconds(100));
  EXPECT_EQ(limiter->When("e"), absl::Milliseconds(200));
  EXPECT_EQ(limiter->When("f"), absl::Milliseconds(300));

  // 100ms refills one token, which pays off one reservation.
  clock.Advance(absl::ToInt64Nanoseconds(absl::Milliseconds(100)));
  EXPECT_EQ(limiter->When("g"), absl::Milliseconds(300));

  // After a long pause the bucket is full again, but holds no more than burst.
  clock.AdvanceSeconds(60);
  EXPECT_EQ(limiter->When("h"), absl::ZeroDuration());
  EXPECT_EQ(limiter->When("i"), absl::ZeroDuration());
  EXPECT_EQ(limiter->When("j"), absl::ZeroDuration());
  EXPECT_EQ(limiter->When("k"), absl::Milliseconds(100));
}

TEST(BucketRateLimiterTest, CallersWaitingTheirAnswerArePacedAtQps) {
  FakeClock clock;
  auto limiter = NewBucketRateLimiter(/*qps=*/4, /*burst=*/1, clock);
  // A caller that waits each answer before asking again acts every 1/qps.
  absl::Duration waited = absl::ZeroDuration();
  for (int i = 0; i < 20; ++i) {
    absl::Duration wait = limiter->When("a");
    EXPECT_EQ(wait, i == 0 ? absl::ZeroDuration() : absl::Milliseconds(250)) << "call " << i;
    clock.Advance(absl::ToInt64Nanoseconds(wait));
    waited += wait;
  }
  EXPECT_EQ(waited, absl::Milliseconds(250) * 19);  // 20 actions at 4 per second.
}

TEST(BucketRateLimiterTest, IsPerQueueNotPerItem) {
  FakeClock clock;
  auto limiter = NewBucketRateLimiter(/*qps=*/1, /*burst=*/1, clock);
  EXPECT_EQ(limiter->When("a"), absl::ZeroDuration());
  EXPECT_EQ(limiter->When("b"), absl::Seconds(1));
  EXPECT_EQ(limiter->NumRequeues("a"), 0);
  limiter->Forget("b");  // Does not give tokens back.
  EXPECT_EQ(limiter->When("c"), absl::Seconds(2));
}

TEST(MaxOfRateLimiterTest, TakesTheLongestAndForwardsToAll) {
  FakeClock clock;
  std::vector<std::unique_ptr<RateLimiter>> parts;
  parts.push_back(NewItemExponentialRateLimiter(absl::Milliseconds(1), absl::Seconds(10)));
  parts.push_back(NewBucketRateLimiter(/*qps=*/1, /*burst=*/2, clock));
  auto limiter = NewMaxOfRateLimiter(std::move(parts));

  EXPECT_EQ(limiter->When("a"), absl::Milliseconds(1));  // Exponential wins.
  EXPECT_EQ(limiter->When("a"), absl::Milliseconds(2));
  EXPECT_EQ(limiter->When("a"), absl::Seconds(1));  // Bucket empty: it wins.
  EXPECT_EQ(limiter->NumRequeues("a"), 3);

  limiter->Forget("a");
  EXPECT_EQ(limiter->NumRequeues("a"), 0);
  clock.AdvanceSeconds(100);
  EXPECT_EQ(limiter->When("a"), absl::Milliseconds(1));
}

TEST(DefaultControllerRateLimiterTest, ExponentialFromFiveMsAndTenQpsBurstHundred) {
  FakeClock clock;
  auto limiter = NewDefaultControllerRateLimiter(clock);
  // One item: 5ms doubling, while the bucket (burst 100) does not bind.
  EXPECT_EQ(limiter->When("a"), absl::Milliseconds(5));
  EXPECT_EQ(limiter->When("a"), absl::Milliseconds(10));
  EXPECT_EQ(limiter->When("a"), absl::Milliseconds(20));
  EXPECT_EQ(limiter->NumRequeues("a"), 3);
  // 97 more distinct items use up the burst of 100...
  for (int i = 0; i < 97; ++i) {
    EXPECT_EQ(limiter->When(absl::StrCat("item-", i)), absl::Milliseconds(5)) << i;
  }
  // ...then the bucket paces at 10 qps.
  EXPECT_EQ(limiter->When("x"), absl::Milliseconds(100));
  EXPECT_EQ(limiter->When("y"), absl::Milliseconds(200));
  // The exponential part caps at 1000s.
  for (int i = 0; i < 40; ++i) limiter->When("b");
  clock.AdvanceSeconds(1e6);
  EXPECT_EQ(limiter->When("b"), absl::Seconds(1000));
}

}  // namespace
}  // namespace kubetrain::kube
