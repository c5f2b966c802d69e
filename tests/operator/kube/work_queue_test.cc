#include "operator/kube/work_queue.h"

#include <array>
#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "gtest/gtest.h"
#include "tests/support/wait_for.h"

namespace kubetrain::kube {
namespace {

// Generous: the machine running the tests is shared and loaded.
constexpr absl::Duration kDeadline = absl::Seconds(20);

bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout = kDeadline) {
  return testing_util::WaitFor(condition, timeout, absl::Milliseconds(1));
}

template <typename T>
bool Ready(const std::future<T>& future, absl::Duration timeout = kDeadline) {
  return future.wait_for(absl::ToChronoMilliseconds(timeout)) == std::future_status::ready;
}

// For tests about ordering and concurrency; tests about time use a FakeClock
// and advance it, so nothing sleeps and nothing depends on the load.
const RealClock real_clock;

std::unique_ptr<RateLimiter> FastLimiter() {
  return NewItemExponentialRateLimiter(absl::Milliseconds(1), absl::Milliseconds(10));
}

// Records every delay its inner limiter hands out.
class RecordingLimiter final : public RateLimiter {
 public:
  explicit RecordingLimiter(std::unique_ptr<RateLimiter> inner) : inner_(std::move(inner)) {}
  absl::Duration When(const std::string& item) override {
    absl::Duration d = inner_->When(item);
    absl::MutexLock lock(&mu_);
    delays_.push_back(d);
    return d;
  }
  void Forget(const std::string& item) override { inner_->Forget(item); }
  int NumRequeues(const std::string& item) const override { return inner_->NumRequeues(item); }
  std::vector<absl::Duration> delays() const {
    absl::MutexLock lock(&mu_);
    return delays_;
  }

 private:
  std::unique_ptr<RateLimiter> inner_;
  mutable absl::Mutex mu_;
  std::vector<absl::Duration> delays_ ABSL_GUARDED_BY(mu_);
};

TEST(WorkQueueTest, AddIsDeduplicatedWhileQueued) {
  WorkQueue queue(FastLimiter(), real_clock);
  queue.Add("a");
  queue.Add("a");
  queue.Add("a");
  EXPECT_EQ(queue.Len(), 1);

  std::string item;
  ASSERT_TRUE(queue.Get(&item));
  EXPECT_EQ(item, "a");
  bool shut_down = true;
  EXPECT_FALSE(queue.GetWithTimeout(&item, absl::Milliseconds(20), &shut_down));
  EXPECT_FALSE(shut_down);
  queue.Done("a");
  EXPECT_EQ(queue.Len(), 0);
}

TEST(WorkQueueTest, GetKeepsAddOrder) {
  WorkQueue queue(FastLimiter(), real_clock);
  for (const char* name : {"c", "a", "b", "a"}) queue.Add(name);
  std::string item;
  for (const char* want : {"c", "a", "b"}) {
    ASSERT_TRUE(queue.Get(&item));
    EXPECT_EQ(item, want);
  }
}

TEST(WorkQueueTest, ReAddWhileProcessingIsDeliveredOnceAfterDone) {
  WorkQueue queue(FastLimiter(), real_clock);
  queue.Add("a");
  std::string item;
  ASSERT_TRUE(queue.Get(&item));
  ASSERT_EQ(item, "a");

  queue.Add("a");
  queue.Add("a");
  EXPECT_EQ(queue.Len(), 0);  // Not handed to a second worker meanwhile.
  EXPECT_FALSE(queue.GetWithTimeout(&item, absl::Milliseconds(20)));

  queue.Done("a");
  EXPECT_EQ(queue.Len(), 1);
  ASSERT_TRUE(queue.GetWithTimeout(&item, kDeadline));
  EXPECT_EQ(item, "a");
  queue.Done("a");
  EXPECT_FALSE(queue.GetWithTimeout(&item, absl::Milliseconds(20)));
  EXPECT_EQ(queue.Len(), 0);
}

TEST(WorkQueueTest, DoneOfUnknownItemIsHarmless) {
  WorkQueue queue(FastLimiter(), real_clock);
  queue.Done("never-added");
  queue.Add("a");
  queue.Done("a");  // Queued, not handed out: stays queued.
  EXPECT_EQ(queue.Len(), 1);
  std::string item;
  ASSERT_TRUE(queue.Get(&item));
  queue.Done("a");
  queue.Done("a");  // Twice.
  EXPECT_EQ(queue.Len(), 0);
  queue.Add("a");
  EXPECT_EQ(queue.Len(), 1);
}

TEST(WorkQueueTest, GetWithTimeoutTimesOutOnTheQueuesClock) {
  FakeClock clock;
  WorkQueue queue(FastLimiter(), clock);
  // Another thread moves the clock 1 ms at a time until the Get returns.
  std::atomic<bool> returned{false};
  std::thread ticker([&] {
    while (!returned.load()) {
      clock.Advance(absl::ToInt64Nanoseconds(absl::Milliseconds(1)));
      absl::SleepFor(absl::Milliseconds(1));
    }
  });
  std::string item = "untouched";
  bool shut_down = true;
  const int64_t start = clock.NowNanos();
  const bool got = queue.GetWithTimeout(&item, absl::Milliseconds(50), &shut_down);
  const int64_t waited = clock.NowNanos() - start;
  returned = true;
  ticker.join();
  EXPECT_FALSE(got);
  EXPECT_FALSE(shut_down);
  EXPECT_EQ(item, "untouched");
  EXPECT_GE(waited, absl::ToInt64Nanoseconds(absl::Milliseconds(50)));  // on the queue's clock
}

TEST(WorkQueueTest, AddAfterFiresAfterTheDelayWithNoOtherEvent) {
  FakeClock clock;
  WorkQueue queue(FastLimiter(), clock);
  queue.AddAfter("a", absl::Milliseconds(200));
  EXPECT_EQ(queue.Delayed(), 1);

  // Not before its time: at 199 ms the timer cannot have moved it.
  clock.Advance(absl::ToInt64Nanoseconds(absl::Milliseconds(199)));
  EXPECT_EQ(queue.Len(), 0);
  EXPECT_EQ(queue.Delayed(), 1);
  // Nobody calls Get or Add: the timer alone must move it into the queue.
  clock.Advance(absl::ToInt64Nanoseconds(absl::Milliseconds(1)));
  ASSERT_TRUE(WaitFor([&] { return queue.Len() == 1; }));
  EXPECT_EQ(queue.Delayed(), 0);
  std::string item;
  ASSERT_TRUE(queue.Get(&item));
  EXPECT_EQ(item, "a");
}

TEST(WorkQueueTest, AddAfterWakesABlockedGet) {
  FakeClock clock;
  WorkQueue queue(FastLimiter(), clock);
  auto got = std::async(std::launch::async, [&] {
    std::string item;
    bool ok = queue.Get(&item);
    return std::make_pair(ok, item);
  });
  queue.AddAfter("a", absl::Milliseconds(100));
  clock.Advance(absl::ToInt64Nanoseconds(absl::Milliseconds(100)));
  ASSERT_TRUE(Ready(got));
  EXPECT_EQ(got.get(), std::make_pair(true, std::string("a")));
}

TEST(WorkQueueTest, AddAfterNonPositiveDelayAddsAtOnce) {
  WorkQueue queue(FastLimiter(), real_clock);
  queue.AddAfter("a", absl::ZeroDuration());
  queue.AddAfter("b", -absl::Seconds(1));
  EXPECT_EQ(queue.Len(), 2);
  EXPECT_EQ(queue.Delayed(), 0);
}

TEST(WorkQueueTest, RepeatedAddAfterKeepsTheEarliestTime) {
  FakeClock clock;
  WorkQueue queue(FastLimiter(), clock);
  queue.AddAfter("late-then-early", absl::Hours(1));
  queue.AddAfter("late-then-early", absl::Milliseconds(500));
  queue.AddAfter("early-then-late", absl::Milliseconds(750));
  queue.AddAfter("early-then-late", absl::Hours(1));
  EXPECT_EQ(queue.Delayed(), 2);

  std::string item;
  clock.Advance(absl::ToInt64Nanoseconds(absl::Milliseconds(500)));
  ASSERT_TRUE(WaitFor([&] { return queue.Len() == 1; }));
  ASSERT_TRUE(queue.Get(&item));
  EXPECT_EQ(item, "late-then-early");
  EXPECT_EQ(queue.Delayed(), 1);
  clock.Advance(absl::ToInt64Nanoseconds(absl::Milliseconds(250)));
  ASSERT_TRUE(WaitFor([&] { return queue.Len() == 1; }));
  ASSERT_TRUE(queue.Get(&item));
  EXPECT_EQ(item, "early-then-late");
  // Neither is still waiting for the hour.
  EXPECT_EQ(queue.Delayed(), 0);
}

TEST(WorkQueueTest, DelayedItemsComeOutInTimeOrder) {
  FakeClock clock;
  WorkQueue queue(FastLimiter(), clock);
  queue.AddAfter("third", absl::Milliseconds(300));
  queue.AddAfter("first", absl::Milliseconds(50));
  queue.AddAfter("second", absl::Milliseconds(150));
  std::string item;
  for (const char* want : {"first", "second", "third"}) {
    clock.Advance(absl::ToInt64Nanoseconds(absl::Milliseconds(100)));
    ASSERT_TRUE(WaitFor([&] { return queue.Len() == 1; })) << want;
    ASSERT_TRUE(queue.Get(&item));
    EXPECT_EQ(item, want);
    queue.Done(item);
  }
}

TEST(WorkQueueTest, AddAfterOfAQueuedItemDoesNotDuplicateIt) {
  WorkQueue queue(FastLimiter(), real_clock);
  queue.Add("a");
  queue.AddAfter("a", absl::Milliseconds(10));
  ASSERT_TRUE(WaitFor([&] { return queue.Delayed() == 0; }));
  EXPECT_EQ(queue.Len(), 1);
}

TEST(WorkQueueTest, AddRateLimitedBacksOffExponentiallyAndForgetResets) {
  FakeClock clock;
  auto recording = std::make_unique<RecordingLimiter>(
      NewItemExponentialRateLimiter(absl::Milliseconds(20), absl::Seconds(10)));
  RecordingLimiter* limiter = recording.get();
  WorkQueue queue(std::move(recording), clock);

  // Waits out `delay` on the fake clock: not there 1 ns before, there at it.
  auto comes_after = [&](absl::Duration delay) {
    clock.Advance(absl::ToInt64Nanoseconds(delay) - 1);
    if (queue.Len() != 0) return false;
    clock.Advance(1);
    return WaitFor([&] { return queue.Len() == 1; });
  };
  std::string item;
  for (int failure = 0; failure < 4; ++failure) {
    queue.AddRateLimited("a");
    ASSERT_TRUE(comes_after(absl::Milliseconds(20) * (1 << failure))) << "failure " << failure;
    ASSERT_TRUE(queue.Get(&item));
    queue.Done("a");
  }
  EXPECT_EQ(queue.NumRequeues("a"), 4);
  EXPECT_EQ(limiter->delays(),
            (std::vector<absl::Duration>{absl::Milliseconds(20), absl::Milliseconds(40),
                                         absl::Milliseconds(80), absl::Milliseconds(160)}));

  queue.Forget("a");
  EXPECT_EQ(queue.NumRequeues("a"), 0);
  queue.AddRateLimited("a");
  ASSERT_TRUE(comes_after(absl::Milliseconds(20)));
  EXPECT_EQ(limiter->delays().back(), absl::Milliseconds(20));
}

TEST(WorkQueueTest, ConcurrentWorkersNeverHoldTheSameItem) {
  constexpr int kItems = 8;
  constexpr int kWorkers = 4;
  constexpr int kAddsPerAdder = 3000;
  WorkQueue queue(FastLimiter(), real_clock);
  std::array<std::atomic<int>, kItems> in_flight{};
  std::atomic<int> overlaps{0};
  std::atomic<int> processed{0};

  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&] {
      std::string item;
      while (queue.Get(&item)) {
        const int index = std::stoi(item);
        if (in_flight[index].fetch_add(1) != 0) overlaps.fetch_add(1);
        std::this_thread::yield();  // Widen the window for a second holder.
        in_flight[index].fetch_sub(1);
        processed.fetch_add(1);
        queue.Done(item);
      }
    });
  }
  std::vector<std::thread> adders;
  for (int a = 0; a < 2; ++a) {
    adders.emplace_back([&, a] {
      std::mt19937 rng(a);
      for (int i = 0; i < kAddsPerAdder; ++i) queue.Add(std::to_string(rng() % kItems));
    });
  }
  for (auto& adder : adders) adder.join();
  queue.ShutDownWithDrain();
  for (auto& worker : workers) worker.join();

  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_GE(processed.load(), 1);
  EXPECT_LE(processed.load(), 2 * kAddsPerAdder);
  EXPECT_EQ(queue.Len(), 0);
}

TEST(WorkQueueTest, ShutDownWakesBlockedGets) {
  WorkQueue queue(FastLimiter(), real_clock);
  std::vector<std::future<bool>> getters;
  for (int i = 0; i < 3; ++i) {
    getters.push_back(std::async(std::launch::async, [&] {
      std::string item;
      return queue.Get(&item);
    }));
  }
  std::future<bool> timed = std::async(std::launch::async, [&] {
    std::string item;
    bool shut_down = false;
    bool got = queue.GetWithTimeout(&item, absl::Hours(1), &shut_down);
    return !got && shut_down;
  });
  queue.ShutDown();
  EXPECT_TRUE(queue.ShuttingDown());
  for (auto& getter : getters) {
    ASSERT_TRUE(Ready(getter));
    EXPECT_FALSE(getter.get());
  }
  ASSERT_TRUE(Ready(timed));
  EXPECT_TRUE(timed.get());
}

TEST(WorkQueueTest, AfterShutDownGetFailsAtOnceAndAddsAreIgnored) {
  WorkQueue queue(FastLimiter(), real_clock);
  queue.Add("queued");
  queue.AddAfter("delayed", absl::Hours(1));
  queue.ShutDown();
  EXPECT_EQ(queue.Delayed(), 0);  // Dropped.

  std::string item;
  EXPECT_FALSE(queue.Get(&item));
  bool shut_down = false;
  EXPECT_FALSE(queue.GetWithTimeout(&item, absl::Hours(1), &shut_down));
  EXPECT_TRUE(shut_down);

  const int len = queue.Len();
  queue.Add("new");
  queue.AddAfter("new-delayed", absl::Milliseconds(1));
  queue.AddRateLimited("new-limited");
  EXPECT_EQ(queue.Len(), len);
  EXPECT_EQ(queue.Delayed(), 0);
  queue.ShutDown();  // Idempotent.
}

TEST(WorkQueueTest, ShutDownWithDrainHandsOutQueuedItemsAndWaitsForDone) {
  WorkQueue queue(FastLimiter(), real_clock);
  queue.Add("a");
  queue.Add("b");
  queue.AddAfter("delayed", absl::Hours(1));
  std::string first;
  ASSERT_TRUE(queue.Get(&first));
  ASSERT_EQ(first, "a");

  std::future<void> drained = std::async(std::launch::async, [&] { queue.ShutDownWithDrain(); });
  ASSERT_TRUE(WaitFor([&] { return queue.ShuttingDown(); }));
  queue.Add("c");  // Ignored while draining.
  EXPECT_EQ(queue.Delayed(), 0);

  std::string second;
  ASSERT_TRUE(queue.GetWithTimeout(&second, kDeadline));  // Still handed out.
  EXPECT_EQ(second, "b");
  std::string item;
  bool shut_down = false;
  EXPECT_FALSE(queue.GetWithTimeout(&item, kDeadline, &shut_down));  // Nothing left: at once.
  EXPECT_TRUE(shut_down);

  queue.Done("b");
  // "a" is still being processed.
  EXPECT_FALSE(Ready(drained, absl::Milliseconds(50)));
  queue.Done("a");
  ASSERT_TRUE(Ready(drained));
  drained.get();
  EXPECT_FALSE(queue.Get(&item));
}

TEST(WorkQueueTest, ShutDownWithDrainProcessesItemsReAddedBeforeIt) {
  WorkQueue queue(FastLimiter(), real_clock);
  queue.Add("a");
  std::string item;
  ASSERT_TRUE(queue.Get(&item));
  queue.Add("a");  // Re-added while processing, before the shutdown.

  std::future<void> drained = std::async(std::launch::async, [&] { queue.ShutDownWithDrain(); });
  ASSERT_TRUE(WaitFor([&] { return queue.ShuttingDown(); }));
  queue.Done("a");
  ASSERT_TRUE(queue.GetWithTimeout(&item, kDeadline));
  EXPECT_EQ(item, "a");
  EXPECT_FALSE(Ready(drained, absl::Milliseconds(50)));
  queue.Done("a");
  ASSERT_TRUE(Ready(drained));
}

TEST(WorkQueueTest, ShutDownWithDrainOfAnIdleQueueReturns) {
  WorkQueue queue(FastLimiter(), real_clock);
  queue.ShutDownWithDrain();
  std::string item;
  EXPECT_FALSE(queue.Get(&item));
}

TEST(WorkQueueTest, ShutDownEndsADrain) {
  WorkQueue queue(FastLimiter(), real_clock);
  queue.Add("a");
  std::string item;
  ASSERT_TRUE(queue.Get(&item));
  std::future<void> drained = std::async(std::launch::async, [&] { queue.ShutDownWithDrain(); });
  ASSERT_TRUE(WaitFor([&] { return queue.ShuttingDown(); }));
  queue.ShutDown();
  ASSERT_TRUE(Ready(drained));
  queue.Done("a");
}

TEST(WorkQueueTest, DestructorWithPendingDelayedItemsReturns) {
  auto queue = std::make_unique<WorkQueue>(FastLimiter(), real_clock);
  queue->AddAfter("a", absl::Hours(1));
  queue->Add("b");
  const absl::Time start = absl::Now();
  queue.reset();
  EXPECT_LT(absl::Now() - start, kDeadline);
}

class CountingObserver final : public WorkQueueObserver {
 public:
  void OnDepth(int depth) override {
    depth_.store(depth);
    depth_reports_.fetch_add(1);
  }
  void OnAdd() override { adds_.fetch_add(1); }
  void OnRetry() override { retries_.fetch_add(1); }
  void OnLatency(absl::Duration queued_for) override {
    absl::MutexLock lock(&mu_);
    latencies_.push_back(queued_for);
  }
  void OnWorkDuration(absl::Duration work) override {
    absl::MutexLock lock(&mu_);
    work_.push_back(work);
  }

  int depth() const { return depth_.load(); }
  int depth_reports() const { return depth_reports_.load(); }
  int adds() const { return adds_.load(); }
  int retries() const { return retries_.load(); }
  std::vector<absl::Duration> latencies() const {
    absl::MutexLock lock(&mu_);
    return latencies_;
  }
  std::vector<absl::Duration> work() const {
    absl::MutexLock lock(&mu_);
    return work_;
  }

 private:
  std::atomic<int> depth_{-1};
  std::atomic<int> depth_reports_{0};
  std::atomic<int> adds_{0};
  std::atomic<int> retries_{0};
  mutable absl::Mutex mu_;
  std::vector<absl::Duration> latencies_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Duration> work_ ABSL_GUARDED_BY(mu_);
};

TEST(WorkQueueTest, ObserverSeesDepthAddsRetriesLatencyAndWork) {
  CountingObserver observer;
  FakeClock clock;
  WorkQueue queue(FastLimiter(), clock, &observer);

  queue.Add("a");
  queue.Add("a");  // De-duplicated: not an add.
  queue.Add("b");
  EXPECT_EQ(observer.adds(), 2);
  EXPECT_EQ(observer.depth(), 2);

  clock.Advance(absl::ToInt64Nanoseconds(absl::Milliseconds(20)));  // "a" waits 20 ms
  std::string item;
  ASSERT_TRUE(queue.Get(&item));
  EXPECT_EQ(observer.depth(), 1);
  EXPECT_EQ(observer.latencies(), std::vector<absl::Duration>{absl::Milliseconds(20)});

  clock.Advance(absl::ToInt64Nanoseconds(absl::Milliseconds(10)));  // the work takes 10 ms
  queue.Done(item);
  EXPECT_EQ(observer.work(), std::vector<absl::Duration>{absl::Milliseconds(10)});

  queue.AddRateLimited("c");
  queue.AddAfter("d", absl::Milliseconds(1));
  EXPECT_EQ(observer.retries(), 2);
  clock.Advance(absl::ToInt64Nanoseconds(absl::Milliseconds(1)));
  ASSERT_TRUE(WaitFor([&] { return observer.depth() == 3; }));  // b, c, d.
  EXPECT_EQ(observer.adds(), 4);
  EXPECT_EQ(queue.Len(), 3);
}

TEST(WorkQueueTest, StressManyAddersAndWorkers) {
  constexpr int kItems = 50;
  constexpr int kAdders = 4;
  constexpr int kWorkers = 4;
  constexpr int kOpsPerAdder = 4000;
  CountingObserver observer;
  WorkQueue queue(FastLimiter(), real_clock, &observer);
  std::array<std::atomic<int>, kItems> in_flight{};
  std::atomic<int> overlaps{0};
  std::atomic<int> processed{0};

  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      std::mt19937 rng(100 + w);
      std::string item;
      for (;;) {
        bool shut_down = false;
        if (!queue.GetWithTimeout(&item, absl::Milliseconds(5), &shut_down)) {
          if (shut_down) return;
          continue;
        }
        const int index = std::stoi(item);
        if (in_flight[index].fetch_add(1) != 0) overlaps.fetch_add(1);
        if (rng() % 4 == 0) {
          queue.AddRateLimited(item);  // Fail now and then.
        } else {
          queue.Forget(item);
        }
        in_flight[index].fetch_sub(1);
        processed.fetch_add(1);
        queue.Done(item);
      }
    });
  }
  std::vector<std::thread> adders;
  for (int a = 0; a < kAdders; ++a) {
    adders.emplace_back([&, a] {
      std::mt19937 rng(a);
      for (int i = 0; i < kOpsPerAdder; ++i) {
        const std::string item = std::to_string(rng() % kItems);
        switch (rng() % 3) {
          case 0:
            queue.AddAfter(item, absl::Microseconds(rng() % 2000));
            break;
          default:
            queue.Add(item);
            break;
        }
        if (i % 500 == 0) {
          queue.Len();
          queue.Delayed();
        }
      }
    });
  }
  for (auto& adder : adders) adder.join();
  // Everything still delayed fires within the limiter's 10ms cap.
  ASSERT_TRUE(WaitFor([&] { return queue.Delayed() == 0 && queue.Len() == 0; }));
  queue.ShutDownWithDrain();
  for (auto& worker : workers) worker.join();

  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_GT(processed.load(), 0);
  EXPECT_EQ(queue.Len(), 0);
  // The last depth reported is the real one, whatever the threads' timing.
  EXPECT_EQ(observer.depth(), 0);
  EXPECT_EQ(observer.latencies().size(), static_cast<size_t>(processed.load()));
  EXPECT_EQ(observer.work().size(), static_cast<size_t>(processed.load()));
}

}  // namespace
}  // namespace kubetrain::kube
