#include "operator/kube/clock_waiter.h"

namespace kubetrain::kube {

ClockWaiter::ClockWaiter(const Clock& clock, absl::Mutex* mu) : clock_(clock), mu_(mu) {
  clock_.AddWatcher(this);
}

ClockWaiter::~ClockWaiter() { clock_.RemoveWatcher(this); }

void ClockWaiter::OnClockAdvanced() {
  // Taking and releasing the mutex makes absl re-evaluate the conditions of
  // AwaitUntil(); the signal wakes WaitUntil().
  absl::MutexLock lock(mu_);
  cv_.SignalAll();
}

bool ClockWaiter::AwaitUntil(absl::Mutex& mu, const std::function<bool()>& done,
                             int64_t deadline_nanos) {
  KT_CHECK(&mu == mu_);
  auto ready = [&] { return done() || clock_.NowNanos() >= deadline_nanos; };
  while (true) {
    if (done()) return true;
    const int64_t now = clock_.NowNanos();
    if (now >= deadline_nanos) return false;
    // A real clock's deadline passes in real time; a fake one's when it is
    // advanced (OnClockAdvanced releases mu_, which re-evaluates `ready`).
    mu.AwaitWithTimeout(absl::Condition(&ready), absl::Nanoseconds(deadline_nanos - now));
  }
}

bool ClockWaiter::AwaitFor(absl::Mutex& mu, const std::function<bool()>& done,
                           absl::Duration timeout) {
  return AwaitUntil(mu, done, clock_.NowNanos() + absl::ToInt64Nanoseconds(timeout));
}

void ClockWaiter::WaitUntil(absl::Mutex& mu, int64_t deadline_nanos) {
  KT_CHECK(&mu == mu_);
  const int64_t now = clock_.NowNanos();
  if (now >= deadline_nanos) return;
  cv_.WaitWithTimeout(&mu, absl::Nanoseconds(deadline_nanos - now));
}

void ClockWaiter::Wait(absl::Mutex& mu) {
  KT_CHECK(&mu == mu_);
  cv_.Wait(&mu);
}

}  // namespace kubetrain::kube
