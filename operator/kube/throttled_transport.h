// ThrottledTransport: the client-side rate limit of the operator's API
// client (--kube-api-qps, --kube-api-burst), as client-go's token bucket
// (flowcontrol.NewTokenBucketRateLimiter): `burst` requests may go at once,
// then one every 1/qps seconds; a request over the limit waits for its turn
// on the clock. Watches open through it too (one token each); reading an open
// watch costs nothing. qps <= 0 means no limit.
//
// Thread-safe; requests are served in the order they reserve a token.
#ifndef KUBETRAIN_OPERATOR_KUBE_THROTTLED_TRANSPORT_H_
#define KUBETRAIN_OPERATOR_KUBE_THROTTLED_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "operator/kube/clock_waiter.h"
#include "operator/kube/http_transport.h"

namespace kubetrain::kube {

struct ThrottleOptions {
  double qps = 20;  // controller-runtime's and kube-controller-manager's default
  int burst = 30;
};

// InvalidArgument unless qps is finite and >= 0 and (with qps > 0) burst >= 1.
absl::Status ValidateThrottleOptions(const ThrottleOptions& options);

class ThrottledTransport final : public HttpTransport {
 public:
  // `clock` must outlive this.
  ThrottledTransport(std::unique_ptr<HttpTransport> inner, ThrottleOptions options,
                     const Clock& clock);

  absl::StatusOr<HttpResponse> Send(const HttpRequest& request) override;
  absl::StatusOr<StreamResponse> OpenStream(const HttpRequest& request,
                                            absl::Duration idle_timeout) override;
  std::string Server() const override { return inner_->Server(); }

  // Requests that had to wait for a token, and for how long in all.
  int64_t throttled() const { return throttled_.load(); }
  absl::Duration waited() const { return absl::Nanoseconds(waited_nanos_.load()); }

  // Shutting down: requests waiting for their turn fail at once
  // (Cancelled), and later ones go without waiting (the few a shutdown
  // still sends: releasing the Lease, the last Events).
  void Interrupt();

 private:
  // Takes a token, waiting for it when none is left; Cancelled when
  // Interrupt() ends the wait.
  absl::Status Acquire();

  const std::unique_ptr<HttpTransport> inner_;
  const ThrottleOptions options_;
  absl::Mutex mu_;
  // The bucket as of `last_nanos_`: tokens may go negative (reservations
  // of requests waiting for their turn).
  double tokens_ ABSL_GUARDED_BY(mu_);
  int64_t last_nanos_ ABSL_GUARDED_BY(mu_);
  bool interrupted_ ABSL_GUARDED_BY(mu_) = false;
  ClockWaiter waiter_;
  std::atomic<int64_t> throttled_{0};
  std::atomic<int64_t> waited_nanos_{0};
};

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_OPERATOR_KUBE_THROTTLED_TRANSPORT_H_
