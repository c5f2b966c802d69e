// Typed Kubernetes API errors carried in absl::Status.
//
// Every failed call of the client returns a Status whose code follows the
// kind of failure, with the API's Status body (reason, message, code,
// details.retryAfterSeconds) kept as a payload so callers can ask precise
// questions: IsConflict(s), IsGone(s), RetryAfter(s)...
//
//   kind              HTTP            absl code
//   kBadRequest       400             kInvalidArgument
//   kUnauthorized     401             kUnauthenticated
//   kForbidden        403             kPermissionDenied
//   kNotFound         404             kNotFound
//   kMethodNotAllowed 405             kUnimplemented
//   kNotAcceptable    406/415         kInvalidArgument
//   kAlreadyExists    409 AlreadyExists  kAlreadyExists
//   kConflict         409 (other)     kAborted
//   kGone             410             kOutOfRange
//   kInvalid          422             kInvalidArgument
//   kTooManyRequests  429             kResourceExhausted
//   kServerError      5xx             kUnavailable (503/504/ServerTimeout) or kInternal
//   kNetwork          no HTTP answer  kUnavailable
//   kDecode           bad body        kDataLoss
//
// Value functions; thread-safe.
#ifndef KUBETRAIN_OPERATOR_KUBE_API_ERROR_H_
#define KUBETRAIN_OPERATOR_KUBE_API_ERROR_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kubetrain::kube {

enum class ApiErrorKind {
  kNone,
  kBadRequest,
  kUnauthorized,
  kForbidden,
  kNotFound,
  kMethodNotAllowed,
  kNotAcceptable,
  kAlreadyExists,
  kConflict,
  kGone,
  kInvalid,
  kTooManyRequests,
  kServerError,
  kNetwork,
  kDecode,
  kOther,
};

absl::string_view ApiErrorKindName(ApiErrorKind kind);

// Builds the Status for an HTTP answer that is not 2xx. `body` is the
// response body (a metav1.Status JSON when the server sent one; any text
// otherwise); `retry_after_header` is the Retry-After header ("" if none).
// `what` names the request ("GET /api/v1/namespaces/x/pods/y") for messages.
absl::Status StatusFromHttp(int http_code, absl::string_view body,
                            absl::string_view retry_after_header, absl::string_view what);

// A Status for a request that got no HTTP answer (connection refused, reset,
// TLS failure, timeout).
absl::Status NetworkError(absl::string_view what, absl::string_view detail);

// A Status for a 2xx answer whose body could not be decoded.
absl::Status DecodeError(absl::string_view what, absl::string_view detail);

ApiErrorKind KindOf(const absl::Status& status);
int HttpCodeOf(const absl::Status& status);        // 0 when none
std::string ReasonOf(const absl::Status& status);  // metav1.Status reason, "" when none
std::optional<absl::Duration> RetryAfter(const absl::Status& status);

// NotFound and AlreadyExists map to absl's codes of the same name: use
// absl::IsNotFound(s) and absl::IsAlreadyExists(s).
inline bool IsConflict(const absl::Status& s) { return KindOf(s) == ApiErrorKind::kConflict; }
inline bool IsGone(const absl::Status& s) { return KindOf(s) == ApiErrorKind::kGone; }
inline bool IsForbidden(const absl::Status& s) { return KindOf(s) == ApiErrorKind::kForbidden; }
inline bool IsInvalid(const absl::Status& s) { return KindOf(s) == ApiErrorKind::kInvalid; }
inline bool IsTooManyRequests(const absl::Status& s) {
  return KindOf(s) == ApiErrorKind::kTooManyRequests;
}
inline bool IsServerError(const absl::Status& s) { return KindOf(s) == ApiErrorKind::kServerError; }
inline bool IsNetwork(const absl::Status& s) { return KindOf(s) == ApiErrorKind::kNetwork; }

// 429, 5xx and network failures: worth retrying after a pause.
bool IsRetryable(const absl::Status& status);

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_OPERATOR_KUBE_API_ERROR_H_
