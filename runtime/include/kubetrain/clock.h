// Clock: the runtime's only source of time, so tests can control it.
// Implementations must be thread-safe.
#ifndef KUBETRAIN_CLOCK_H_
#define KUBETRAIN_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace kubetrain {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic nanoseconds since an arbitrary epoch.
  virtual int64_t NowNanos() const = 0;
  double NowSeconds() const { return static_cast<double>(NowNanos()) * 1e-9; }
};

// std::chrono::steady_clock.
class RealClock final : public Clock {
 public:
  int64_t NowNanos() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

// A clock that moves only when told to. For tests.
class FakeClock final : public Clock {
 public:
  int64_t NowNanos() const override { return now_.load(); }
  void Advance(int64_t nanos) { now_ += nanos; }
  void AdvanceSeconds(double s) { now_ += static_cast<int64_t>(s * 1e9); }

 private:
  std::atomic<int64_t> now_{0};
};

}  // namespace kubetrain

#endif  // KUBETRAIN_CLOCK_H_
