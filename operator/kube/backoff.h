// Backoff: jittered exponential delays (initial, x2 per step, capped), as
// client-go's wait.Backoff. Not thread-safe: one per retry loop.
#ifndef KUBETRAIN_OPERATOR_KUBE_BACKOFF_H_
#define KUBETRAIN_OPERATOR_KUBE_BACKOFF_H_

#include "absl/random/random.h"
#include "absl/time/time.h"

namespace kubetrain::kube {

class Backoff {
 public:
  // Each delay is d * (1 + jitter * U[0,1)), d doubling from `initial` to `max`.
  Backoff(absl::Duration initial, absl::Duration max, double jitter = 0.5)
      : initial_(initial), max_(max), jitter_(jitter), next_(initial) {}

  absl::Duration Next() {
    absl::Duration base = next_;
    next_ = std::min(next_ * 2, max_);
    double factor = 1.0 + jitter_ * absl::Uniform<double>(gen_, 0.0, 1.0);
    return std::min(base * factor, max_ * (1.0 + jitter_));
  }
  void Reset() { next_ = initial_; }

 private:
  const absl::Duration initial_;
  const absl::Duration max_;
  const double jitter_;
  absl::Duration next_;
  absl::BitGen gen_;
};

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_OPERATOR_KUBE_BACKOFF_H_
