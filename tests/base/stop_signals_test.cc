// SIGTERM and SIGINT, blocked, are taken by Wait or by the StopSignalThread,
// never by the default action (which would end this test process).
#include "base/stop_signals.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kubetrain::base {
namespace {

TEST(StopSignalsTest, WaitReturnsAPendingSignalElseZeroWhenTheTimeIsUp) {
  StopSignals::Block();
  EXPECT_EQ(StopSignals::Wait(absl::Milliseconds(10)), 0);
  ASSERT_EQ(raise(SIGTERM), 0);  // pending on this thread: blocked
  EXPECT_EQ(StopSignals::Wait(absl::Seconds(10)), SIGTERM);
  ASSERT_EQ(raise(SIGINT), 0);
  EXPECT_EQ(StopSignals::Wait(absl::Seconds(10)), SIGINT);
  EXPECT_EQ(StopSignals::Wait(absl::ZeroDuration()), 0);
}

TEST(StopSignalsTest, TheThreadCountsEachSignalAndStopsWhenDestroyed) {
  StopSignals::Block();  // before the thread, which inherits the mask
  absl::Mutex mu;
  std::vector<std::pair<int, int>> got;
  auto wait_for = [&](size_t n) {
    absl::MutexLock lock(&mu);
    auto reached = [&] { return got.size() >= n; };
    return mu.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(30));
  };
  {
    StopSignalThread thread([&](int sig, int count) {
      absl::MutexLock lock(&mu);
      got.emplace_back(sig, count);
    });
    ASSERT_EQ(kill(getpid(), SIGINT), 0);  // to the process: the one thread waiting takes it
    ASSERT_TRUE(wait_for(1));
    ASSERT_EQ(kill(getpid(), SIGTERM), 0);
    ASSERT_TRUE(wait_for(2));
  }  // the destructor wakes and joins the thread without calling on_signal
  EXPECT_EQ(got, (std::vector<std::pair<int, int>>{{SIGINT, 1}, {SIGTERM, 2}}));
}

TEST(StopSignalsTest, Names) {
  EXPECT_STREQ(StopSignals::Name(SIGTERM), "SIGTERM");
  EXPECT_STREQ(StopSignals::Name(SIGINT), "SIGINT");
  EXPECT_STREQ(StopSignals::Name(SIGHUP), "another signal");
}

}  // namespace
}  // namespace kubetrain::base
