// Clock: the only source of time for the runtime and the operator, so tests
// can control it. Implementations must be thread-safe.
#ifndef KUBETRAIN_BASE_CLOCK_H_
#define KUBETRAIN_BASE_CLOCK_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

namespace kubetrain {

// Told when a clock's time jumps (FakeClock::Advance), so that a thread
// waiting for a time on that clock looks at it again. A real clock never
// calls it: its waiters time out in real time. Called with the clock's
// watcher lock held: an implementation must not add or remove watchers.
class ClockWatcher {
 public:
  virtual ~ClockWatcher() = default;
  virtual void OnClockAdvanced() = 0;
};

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic nanoseconds since an arbitrary epoch: durations, deadlines.
  virtual int64_t NowNanos() const = 0;
  // Wall-clock microseconds since the Unix epoch: timestamps others read
  // (Kubernetes status, events, leases).
  virtual int64_t UnixMicros() const = 0;
  // `watcher` hears of every jump of this clock until removed; it must be
  // removed before it is destroyed. Neither may be called while holding a
  // lock that OnClockAdvanced() takes.
  virtual void AddWatcher(ClockWatcher* /*watcher*/) const {}
  virtual void RemoveWatcher(ClockWatcher* /*watcher*/) const {}
  double NowSeconds() const { return static_cast<double>(NowNanos()) * 1e-9; }
};

// std::chrono::steady_clock and system_clock.
class RealClock final : public Clock {
 public:
  int64_t NowNanos() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  int64_t UnixMicros() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// A clock that moves only when told to. For tests. Its wall clock starts at
// `unix_micros` (2026-01-01T00:00:00Z unless given) and moves with it.
class FakeClock final : public Clock {
 public:
  static constexpr int64_t kDefaultUnixMicros = int64_t{1767225600} * 1000000;

  explicit FakeClock(int64_t unix_micros = kDefaultUnixMicros) : start_unix_micros_(unix_micros) {}

  int64_t NowNanos() const override { return now_.load(); }
  int64_t UnixMicros() const override { return start_unix_micros_ + now_.load() / 1000; }
  void AddWatcher(ClockWatcher* watcher) const override {
    std::lock_guard<std::mutex> lock(mu_);
    watchers_.push_back(watcher);
  }
  void RemoveWatcher(ClockWatcher* watcher) const override {
    std::lock_guard<std::mutex> lock(mu_);
    watchers_.erase(std::remove(watchers_.begin(), watchers_.end(), watcher), watchers_.end());
  }

  // Moves the time forward and tells every watcher.
  void Advance(int64_t nanos) {
    now_ += nanos;
    std::lock_guard<std::mutex> lock(mu_);
    for (ClockWatcher* watcher : watchers_) watcher->OnClockAdvanced();
  }
  void AdvanceSeconds(double s) { Advance(static_cast<int64_t>(s * 1e9)); }

 private:
  const int64_t start_unix_micros_;
  std::atomic<int64_t> now_{0};
  mutable std::mutex mu_;
  mutable std::vector<ClockWatcher*> watchers_;
};

}  // namespace kubetrain

#endif  // KUBETRAIN_BASE_CLOCK_H_
