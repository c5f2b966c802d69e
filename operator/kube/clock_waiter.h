// ClockWaiter: waits, under an absl::Mutex, for a condition or for a time on
// a kubetrain::Clock, whichever comes first. With a RealClock the time passes
// in real time; with a FakeClock it passes when a test advances the clock:
// the waiter hears of the jump and looks again, so a time-based test never
// sleeps. The work queue's delays, the informer's backoff and resync and the
// leader elector's retries wait through one.
//
// Thread-safe. Construct and destroy it without holding `mu` (it registers
// with the clock); the clock and `mu` must outlive it. Every wait names the
// owner's mutex again (it must be `mu`), so Clang's thread-safety analysis
// sees the caller hold exactly the lock the wait requires.
#ifndef KUBETRAIN_OPERATOR_KUBE_CLOCK_WAITER_H_
#define KUBETRAIN_OPERATOR_KUBE_CLOCK_WAITER_H_

#include <cstdint>
#include <functional>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/check.h"
#include "base/clock.h"

namespace kubetrain::kube {

class ClockWaiter final : public ClockWatcher {
 public:
  ClockWaiter(const Clock& clock, absl::Mutex* mu);
  ~ClockWaiter() override;

  ClockWaiter(const ClockWaiter&) = delete;
  ClockWaiter& operator=(const ClockWaiter&) = delete;

  // With `mu` held: blocks until `done()` holds (it is evaluated under `mu`)
  // or the clock reaches `deadline_nanos` (Clock::NowNanos()). Returns
  // done() as it was last evaluated.
  bool AwaitUntil(absl::Mutex& mu, const std::function<bool()>& done, int64_t deadline_nanos)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // AwaitUntil(done, now + timeout).
  bool AwaitFor(absl::Mutex& mu, const std::function<bool()>& done, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // With `mu` held: blocks until the clock reaches `deadline_nanos` or a
  // Wake() (or any release of `mu` by another thread that changed what the
  // caller waits for); the caller looks again at what it waits for.
  void WaitUntil(absl::Mutex& mu, int64_t deadline_nanos) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Blocks, with `mu` held, until a Wake() or a jump of the clock.
  void Wait(absl::Mutex& mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Wakes WaitUntil()/Wait(). Call with `mu` held.
  void Wake(absl::Mutex& mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    KT_CHECK(&mu == mu_);
    cv_.SignalAll();
  }

  int64_t NowNanos() const { return clock_.NowNanos(); }
  const Clock& clock() const { return clock_; }

  void OnClockAdvanced() override;

 private:
  const Clock& clock_;
  absl::Mutex* const mu_;
  absl::CondVar cv_;
};

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_OPERATOR_KUBE_CLOCK_WAITER_H_
