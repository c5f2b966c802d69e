#include "operator/kube/rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "base/check.h"

namespace kubetrain::kube {
namespace {

class ItemExponentialRateLimiter final : public RateLimiter {
 public:
  ItemExponentialRateLimiter(absl::Duration base, absl::Duration max_delay)
      : base_(base), max_delay_(max_delay) {
    KT_CHECK(base >= absl::ZeroDuration()) << absl::FormatDuration(base);
    KT_CHECK(max_delay >= absl::ZeroDuration()) << absl::FormatDuration(max_delay);
  }

  absl::Duration When(const std::string& item) override {
    int exp;
    {
      absl::MutexLock lock(&mu_);
      int& failures = failures_[item];
      exp = failures;
      if (failures < std::numeric_limits<int>::max()) ++failures;
    }
    // In floating point so that large exponents saturate instead of wrapping.
    const double nanos = absl::ToDoubleNanoseconds(base_) * std::ldexp(1.0, std::min(exp, 1023));
    if (!(nanos < absl::ToDoubleNanoseconds(max_delay_))) return max_delay_;
    return absl::Nanoseconds(nanos);  // Saturates to infinity.
  }

  void Forget(const std::string& item) override {
    absl::MutexLock lock(&mu_);
    failures_.erase(item);
  }

  int NumRequeues(const std::string& item) const override {
    absl::MutexLock lock(&mu_);
    auto it = failures_.find(item);
    return it == failures_.end() ? 0 : it->second;
  }

 private:
  const absl::Duration base_;
  const absl::Duration max_delay_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, int> failures_ ABSL_GUARDED_BY(mu_);
};

// golang.org/x/time/rate's reservation arithmetic: tokens may go negative,
// and a negative balance is the wait before the reserved token exists.
class BucketRateLimiter final : public RateLimiter {
 public:
  BucketRateLimiter(double qps, int burst, const Clock& clock)
      : qps_(qps), burst_(burst), clock_(clock), tokens_(burst), last_nanos_(clock.NowNanos()) {
    KT_CHECK(qps > 0) << "qps " << qps;
    KT_CHECK(burst >= 1) << "burst " << burst;
  }

  absl::Duration When(const std::string& /*item*/) override {
    double tokens;
    {
      absl::MutexLock lock(&mu_);
      const int64_t now = clock_.NowNanos();
      if (now > last_nanos_) {
        tokens_ = std::min<double>(burst_,
                                   tokens_ + static_cast<double>(now - last_nanos_) * 1e-9 * qps_);
        last_nanos_ = now;
      }
      tokens_ -= 1;
      tokens = tokens_;
    }
    if (tokens >= 0) return absl::ZeroDuration();
    return absl::Nanoseconds(std::llround(-tokens / qps_ * 1e9));
  }

  void Forget(const std::string& /*item*/) override {}
  int NumRequeues(const std::string& /*item*/) const override { return 0; }

 private:
  const double qps_;
  const int burst_;
  const Clock& clock_;
  absl::Mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  int64_t last_nanos_ ABSL_GUARDED_BY(mu_);
};

// Holds no state of its own: thread-safe because its parts are.
class MaxOfRateLimiter final : public RateLimiter {
 public:
  explicit MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter>> limiters)
      : limiters_(std::move(limiters)) {
    KT_CHECK(!limiters_.empty()) << "NewMaxOfRateLimiter needs at least one limiter";
    for (const auto& limiter : limiters_) KT_CHECK(limiter != nullptr);
  }

  absl::Duration When(const std::string& item) override {
    absl::Duration longest = absl::ZeroDuration();
    for (const auto& limiter : limiters_) longest = std::max(longest, limiter->When(item));
    return longest;
  }

  void Forget(const std::string& item) override {
    for (const auto& limiter : limiters_) limiter->Forget(item);
  }

  int NumRequeues(const std::string& item) const override {
    int most = 0;
    for (const auto& limiter : limiters_) most = std::max(most, limiter->NumRequeues(item));
    return most;
  }

 private:
  const std::vector<std::unique_ptr<RateLimiter>> limiters_;
};

}  // namespace

std::unique_ptr<RateLimiter> NewItemExponentialRateLimiter(absl::Duration base,
                                                           absl::Duration max_delay) {
  return std::make_unique<ItemExponentialRateLimiter>(base, max_delay);
}

std::unique_ptr<RateLimiter> NewBucketRateLimiter(double qps, int burst, const Clock& clock) {
  return std::make_unique<BucketRateLimiter>(qps, burst, clock);
}

std::unique_ptr<RateLimiter> NewMaxOfRateLimiter(
    std::vector<std::unique_ptr<RateLimiter>> limiters) {
  return std::make_unique<MaxOfRateLimiter>(std::move(limiters));
}

std::unique_ptr<RateLimiter> NewDefaultControllerRateLimiter(const Clock& clock) {
  std::vector<std::unique_ptr<RateLimiter>> limiters;
  limiters.push_back(NewItemExponentialRateLimiter(absl::Milliseconds(5), absl::Seconds(1000)));
  limiters.push_back(NewBucketRateLimiter(10, 100, clock));
  return NewMaxOfRateLimiter(std::move(limiters));
}

}  // namespace kubetrain::kube
