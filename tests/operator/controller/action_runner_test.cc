#include "operator/controller/action_runner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "base/clock.h"
#include "tests/support/wait_for.h"

namespace kubetrain::controller {
namespace {

using testing_util::WaitFor;

// What the completion callback was told, by key.
struct Completions {
  struct Done {
    absl::Status status;
    bool wanted = false;
  };
  absl::Mutex mu;
  std::map<std::string, std::vector<Done>> by_key ABSL_GUARDED_BY(mu);

  ActionRunner::Done Callback() {
    return [this](const std::string& key, const absl::Status& status, bool wanted) {
      absl::MutexLock lock(&mu);
      by_key[key].push_back(Done{status, wanted});
    };
  }
  size_t Count(const std::string& key) {
    absl::MutexLock lock(&mu);
    return by_key.count(key) ? by_key[key].size() : 0;
  }
  Done Last(const std::string& key) {
    absl::MutexLock lock(&mu);
    return by_key[key].back();
  }
};

class CountingObserver final : public ActionObserver {
 public:
  void OnPlan(absl::Duration, absl::Duration, bool error) override {
    ++plans;
    if (error) ++errors;
  }
  std::atomic<int> plans{0};
  std::atomic<int> errors{0};
};

TEST(ActionRunnerTest, RunsThePlanOffTheCallersThreadAndReportsItsStatus) {
  RealClock clock;
  Completions done;
  CountingObserver observer;
  ActionRunner runner(2, done.Callback(), clock, &observer);
  absl::Notification release;
  std::atomic<bool> started{false};
  ASSERT_TRUE(runner
                  .Submit("ns/a",
                          [&] {
                            started = true;
                            release.WaitForNotification();
                            return absl::UnavailableError("server said no");
                          })
                  .ok());
  // Submit returned while the plan is still blocked: the caller never waits.
  ASSERT_TRUE(WaitFor([&] { return started.load(); }));
  EXPECT_EQ(runner.InFlight(), 1);
  EXPECT_EQ(done.Count("ns/a"), 0u);
  release.Notify();
  ASSERT_TRUE(WaitFor([&] { return done.Count("ns/a") == 1; }));
  EXPECT_TRUE(absl::IsUnavailable(done.Last("ns/a").status));
  EXPECT_FALSE(done.Last("ns/a").wanted);
  EXPECT_TRUE(WaitFor([&] { return runner.InFlight() == 0; }));
  EXPECT_EQ(observer.plans.load(), 1);
  EXPECT_EQ(observer.errors.load(), 1);
}

TEST(ActionRunnerTest, OnePlanPerKeyAndADeferredPassIsReported) {
  RealClock clock;
  Completions done;
  ActionRunner runner(4, done.Callback(), clock);
  absl::Notification release;
  ASSERT_TRUE(runner
                  .Submit("ns/a",
                          [&] {
                            release.WaitForNotification();
                            return absl::OkStatus();
                          })
                  .ok());
  // The key is busy from Submit on, whether or not a thread has taken it.
  absl::Status again = runner.Submit("ns/a", [] { return absl::OkStatus(); });
  EXPECT_TRUE(absl::IsFailedPrecondition(again)) << again;
  EXPECT_TRUE(runner.DeferIfBusy("ns/a"));
  // Other keys are not held up by it.
  EXPECT_FALSE(runner.DeferIfBusy("ns/b"));
  ASSERT_TRUE(runner.Submit("ns/b", [] { return absl::OkStatus(); }).ok());
  ASSERT_TRUE(WaitFor([&] { return done.Count("ns/b") == 1; }));
  EXPECT_FALSE(done.Last("ns/b").wanted);
  EXPECT_EQ(done.Count("ns/a"), 0u);
  release.Notify();
  ASSERT_TRUE(WaitFor([&] { return done.Count("ns/a") == 1; }));
  EXPECT_TRUE(done.Last("ns/a").status.ok());
  EXPECT_TRUE(done.Last("ns/a").wanted);  // the deferred pass must run now
  // Free again once done.
  EXPECT_FALSE(runner.DeferIfBusy("ns/a"));
  EXPECT_TRUE(runner.Submit("ns/a", [] { return absl::OkStatus(); }).ok());
  ASSERT_TRUE(WaitFor([&] { return done.Count("ns/a") == 2; }));
  EXPECT_FALSE(done.Last("ns/a").wanted);
}

TEST(ActionRunnerTest, AnExceptionBecomesAnInternalError) {
  RealClock clock;
  Completions done;
  ActionRunner runner(1, done.Callback(), clock);
  ASSERT_TRUE(
      runner
          .Submit("ns/a", []() -> absl::Status { throw std::runtime_error("type must be string"); })
          .ok());
  ASSERT_TRUE(WaitFor([&] { return done.Count("ns/a") == 1; }));
  EXPECT_TRUE(absl::IsInternal(done.Last("ns/a").status));
  EXPECT_NE(done.Last("ns/a").status.message().find("type must be string"), std::string::npos);
}

// Stopping (the operator's SIGTERM, with a backlog) drops the plans not
// started (their callbacks hear Cancelled: the next leader reconciles those
// jobs again), lets the running one finish, then refuses more.
TEST(ActionRunnerTest, StopDropsWhatIsQueuedFinishesWhatRunsThenRefusesMore) {
  RealClock clock;
  Completions done;
  std::atomic<int> ran{0};
  {
    ActionRunner runner(1, done.Callback(), clock);
    absl::Notification release, running;
    ASSERT_TRUE(runner
                    .Submit("ns/first",
                            [&] {
                              running.Notify();
                              release.WaitForNotification();
                              ++ran;
                              return absl::OkStatus();
                            })
                    .ok());
    running.WaitForNotification();
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(runner
                      .Submit("ns/j" + std::to_string(i),
                              [&] {
                                ++ran;
                                return absl::OkStatus();
                              })
                      .ok());
    }
    EXPECT_EQ(runner.InFlight(), 6);
    std::thread stopper([&] { runner.Stop(); });
    // The queued five are dropped at once; the running one holds Stop.
    ASSERT_TRUE(WaitFor([&] { return runner.InFlight() == 1; }));
    release.Notify();
    stopper.join();
    EXPECT_EQ(ran.load(), 1);
    absl::Status late = runner.Submit("ns/late", [] { return absl::OkStatus(); });
    EXPECT_TRUE(absl::IsCancelled(late)) << late;
    runner.Stop();  // idempotent
  }
  EXPECT_EQ(done.Count("ns/late"), 0u);
  EXPECT_EQ(done.Count("ns/first"), 1u);
  EXPECT_TRUE(done.Last("ns/first").status.ok());
  ASSERT_EQ(done.Count("ns/j4"), 1u);
  EXPECT_TRUE(absl::IsCancelled(done.Last("ns/j4").status)) << done.Last("ns/j4").status;
}

}  // namespace
}  // namespace kubetrain::controller
