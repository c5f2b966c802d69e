// BearerTokenSource: the token sent in "Authorization: Bearer ...". A static
// token, or a token file (in-cluster service-account tokens are projected
// and rotated by the kubelet) re-read when its contents may have changed:
// at most every `refresh` interval, and at once after the server answered
// 401 (Invalidate()). A failed re-read keeps the last good token.
// Thread-safe.
#ifndef KUBETRAIN_OPERATOR_KUBE_TOKEN_SOURCE_H_
#define KUBETRAIN_OPERATOR_KUBE_TOKEN_SOURCE_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "operator/kube/kube_config.h"

namespace kubetrain::kube {

class BearerTokenSource {
 public:
  // Borrows `env` and `clock`, which must outlive this.
  BearerTokenSource(std::string static_token, std::string token_file, const ConfigEnvironment& env,
                    const Clock& clock, absl::Duration refresh = absl::Minutes(1));

  // "" when there is no token at all (anonymous).
  absl::StatusOr<std::string> Token();
  void Invalidate();

 private:
  const std::string static_token_;
  const std::string token_file_;
  const ConfigEnvironment& env_;
  const Clock& clock_;
  const absl::Duration refresh_;
  absl::Mutex mu_;
  std::string cached_ ABSL_GUARDED_BY(mu_);
  int64_t read_at_nanos_ ABSL_GUARDED_BY(mu_) = 0;
  bool have_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_OPERATOR_KUBE_TOKEN_SOURCE_H_
