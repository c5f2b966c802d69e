#include "operator/kube/token_source.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace kubetrain::kube {

BearerTokenSource::BearerTokenSource(std::string static_token, std::string token_file,
                                     const ConfigEnvironment& env, const Clock& clock,
                                     absl::Duration refresh)
    : static_token_(std::move(static_token)),
      token_file_(std::move(token_file)),
      env_(env),
      clock_(clock),
      refresh_(refresh) {}

absl::StatusOr<std::string> BearerTokenSource::Token() {
  if (token_file_.empty()) return static_token_;
  absl::MutexLock lock(&mu_);
  int64_t now = clock_.NowNanos();
  if (have_ && now - read_at_nanos_ < absl::ToInt64Nanoseconds(refresh_)) return cached_;
  absl::StatusOr<std::string> text = env_.ReadFile(token_file_);
  if (!text.ok()) {
    if (have_) return cached_;  // keep the last good token; the file may be mid-rotation
    if (!static_token_.empty()) return static_token_;
    return absl::UnauthenticatedError(
        absl::StrCat("token file ", token_file_, ": ", text.status().message()));
  }
  cached_ = std::string(absl::StripAsciiWhitespace(*text));
  read_at_nanos_ = now;
  have_ = true;
  return cached_;
}

void BearerTokenSource::Invalidate() {
  absl::MutexLock lock(&mu_);
  read_at_nanos_ = std::numeric_limits<int64_t>::min() / 2;
}

}  // namespace kubetrain::kube
