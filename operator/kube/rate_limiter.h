// Rate limiters for the operator's work queue: how long to wait before an item
// is retried. Modelled on client-go's workqueue rate limiters
// (k8s.io/client-go/util/workqueue/default_rate_limiters.go):
//   - per-item exponential backoff: base * 2^failures, capped at max_delay;
//   - an overall token bucket (qps refill, burst capacity), on a Clock so its
//     arithmetic is testable with FakeClock;
//   - the longest of several limiters;
//   - the default controller limiter: max(exponential 5ms..1000s, bucket 10 qps
//     burst 100).
//
// Every implementation returned here is thread-safe.
#ifndef KUBETRAIN_OPERATOR_KUBE_RATE_LIMITER_H_
#define KUBETRAIN_OPERATOR_KUBE_RATE_LIMITER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "base/clock.h"

namespace kubetrain::kube {

class RateLimiter {
 public:
  virtual ~RateLimiter() = default;
  // How long to wait before re-adding `item`; records one more failure of it.
  virtual absl::Duration When(const std::string& item) = 0;
  // `item` succeeded: forget its failures.
  virtual void Forget(const std::string& item) = 0;
  // Failures recorded for `item` since it was last forgotten.
  virtual int NumRequeues(const std::string& item) const = 0;
};

// base * 2^(failures so far), capped at max_delay (client-go's
// ItemExponentialFailureRateLimiter). The first When() returns base.
std::unique_ptr<RateLimiter> NewItemExponentialRateLimiter(absl::Duration base,
                                                           absl::Duration max_delay);

// One token bucket shared by all items (client-go's BucketRateLimiter over
// golang.org/x/time/rate): the bucket starts full with `burst` tokens and
// refills at `qps` tokens per second. When() reserves a token and returns how
// long until that token is available (zero while tokens remain), so callers
// that each wait their answer are paced at `qps`. Per-item calls are not
// counted: NumRequeues() is 0 and Forget() does nothing. Requires qps > 0 and
// burst >= 1. `clock` must outlive the limiter.
std::unique_ptr<RateLimiter> NewBucketRateLimiter(double qps, int burst, const Clock& clock);

// The longest delay of `limiters` (every one records the failure); Forget()
// forwards to all; NumRequeues() is the largest. Requires at least one.
std::unique_ptr<RateLimiter> NewMaxOfRateLimiter(
    std::vector<std::unique_ptr<RateLimiter>> limiters);

// client-go's DefaultControllerRateLimiter: the max of per-item exponential
// backoff from 5ms to 1000s and a 10 qps, burst 100 bucket on `clock`.
std::unique_ptr<RateLimiter> NewDefaultControllerRateLimiter(const Clock& clock);

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_OPERATOR_KUBE_RATE_LIMITER_H_
