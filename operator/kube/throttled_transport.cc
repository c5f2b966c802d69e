#include "operator/kube/throttled_transport.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kubetrain::kube {

absl::Status ValidateThrottleOptions(const ThrottleOptions& options) {
  if (!std::isfinite(options.qps) || options.qps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kube-api-qps: must be a number >= 0 (0: no limit), got ", options.qps));
  }
  if (options.qps > 0 && options.burst < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kube-api-burst: must be at least 1, got ", options.burst));
  }
  return absl::OkStatus();
}

ThrottledTransport::ThrottledTransport(std::unique_ptr<HttpTransport> inner,
                                       ThrottleOptions options, const Clock& clock)
    : inner_(std::move(inner)),
      options_(options),
      tokens_(std::max(1, options.burst)),
      last_nanos_(clock.NowNanos()),
      waiter_(clock, &mu_) {}

absl::Status ThrottledTransport::Acquire() {
  if (options_.qps <= 0) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  if (interrupted_) return absl::OkStatus();
  const int64_t now = waiter_.NowNanos();
  const double burst = std::max(1, options_.burst);
  tokens_ = std::min(burst, tokens_ + static_cast<double>(now - last_nanos_) * 1e-9 * options_.qps);
  last_nanos_ = now;
  tokens_ -= 1;  // this request's reservation
  if (tokens_ >= 0) return absl::OkStatus();
  // Its turn comes when the bucket has refilled to zero again.
  const int64_t ready = now + static_cast<int64_t>(std::ceil(-tokens_ / options_.qps * 1e9));
  ++throttled_;
  waited_nanos_ += ready - now;
  if (waiter_.AwaitUntil(
          mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return interrupted_; }, ready)) {
    return absl::CancelledError(
        "shutting down: a request waiting for the client rate limit was dropped");
  }
  return absl::OkStatus();
}

void ThrottledTransport::Interrupt() {
  absl::MutexLock lock(&mu_);
  interrupted_ = true;
  waiter_.Wake(mu_);
}

absl::StatusOr<HttpResponse> ThrottledTransport::Send(const HttpRequest& request) {
  if (absl::Status s = Acquire(); !s.ok()) return s;
  return inner_->Send(request);
}

absl::StatusOr<StreamResponse> ThrottledTransport::OpenStream(const HttpRequest& request,
                                                              absl::Duration idle_timeout) {
  if (absl::Status s = Acquire(); !s.ok()) return s;
  return inner_->OpenStream(request, idle_timeout);
}

}  // namespace kubetrain::kube
