#include "operator/kube/api_error.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "operator/kube/object.h"

namespace kubetrain::kube {
namespace {

constexpr char kPayloadUrl[] = "type.kubetrain.io/kube-api-error";

struct ErrorInfo {
  ApiErrorKind kind = ApiErrorKind::kNone;
  int http_code = 0;
  std::string reason;
  int64_t retry_after_ms = -1;
};

absl::Status Make(absl::StatusCode code, std::string message, const ErrorInfo& info) {
  absl::Status status(code, message);
  status.SetPayload(kPayloadUrl,
                    absl::Cord(absl::StrCat(static_cast<int>(info.kind), "|", info.http_code, "|",
                                            info.retry_after_ms, "|", info.reason)));
  return status;
}

std::optional<ErrorInfo> InfoOf(const absl::Status& status) {
  auto payload = status.GetPayload(kPayloadUrl);
  if (!payload) return std::nullopt;
  std::string text(*payload);
  std::vector<std::string> parts = absl::StrSplit(text, absl::MaxSplits('|', 3));
  if (parts.size() != 4) return std::nullopt;
  ErrorInfo info;
  int kind = 0;
  if (!absl::SimpleAtoi(parts[0], &kind) || !absl::SimpleAtoi(parts[1], &info.http_code) ||
      !absl::SimpleAtoi(parts[2], &info.retry_after_ms)) {
    return std::nullopt;
  }
  info.kind = static_cast<ApiErrorKind>(kind);
  info.reason = parts[3];
  return info;
}

ApiErrorKind KindForHttp(int code, absl::string_view reason) {
  switch (code) {
    case 400:
      return ApiErrorKind::kBadRequest;
    case 401:
      return ApiErrorKind::kUnauthorized;
    case 403:
      return ApiErrorKind::kForbidden;
    case 404:
      return ApiErrorKind::kNotFound;
    case 405:
      return ApiErrorKind::kMethodNotAllowed;
    case 406:
    case 415:
      return ApiErrorKind::kNotAcceptable;
    case 409:
      return reason == "AlreadyExists" ? ApiErrorKind::kAlreadyExists : ApiErrorKind::kConflict;
    case 410:
      return ApiErrorKind::kGone;
    case 422:
      return ApiErrorKind::kInvalid;
    case 429:
      return ApiErrorKind::kTooManyRequests;
    default:
      break;
  }
  if (code >= 500 && code <= 599) return ApiErrorKind::kServerError;
  return ApiErrorKind::kOther;
}

absl::StatusCode CodeFor(ApiErrorKind kind, int http_code, absl::string_view reason) {
  switch (kind) {
    case ApiErrorKind::kNone:
      return absl::StatusCode::kOk;
    case ApiErrorKind::kBadRequest:
    case ApiErrorKind::kNotAcceptable:
    case ApiErrorKind::kInvalid:
      return absl::StatusCode::kInvalidArgument;
    case ApiErrorKind::kUnauthorized:
      return absl::StatusCode::kUnauthenticated;
    case ApiErrorKind::kForbidden:
      return absl::StatusCode::kPermissionDenied;
    case ApiErrorKind::kNotFound:
      return absl::StatusCode::kNotFound;
    case ApiErrorKind::kMethodNotAllowed:
      return absl::StatusCode::kUnimplemented;
    case ApiErrorKind::kAlreadyExists:
      return absl::StatusCode::kAlreadyExists;
    case ApiErrorKind::kConflict:
      return absl::StatusCode::kAborted;
    case ApiErrorKind::kGone:
      return absl::StatusCode::kOutOfRange;
    case ApiErrorKind::kTooManyRequests:
      return absl::StatusCode::kResourceExhausted;
    case ApiErrorKind::kServerError:
      return (http_code == 503 || http_code == 504 || reason == "ServerTimeout")
                 ? absl::StatusCode::kUnavailable
                 : absl::StatusCode::kInternal;
    case ApiErrorKind::kNetwork:
      return absl::StatusCode::kUnavailable;
    case ApiErrorKind::kDecode:
      return absl::StatusCode::kDataLoss;
    case ApiErrorKind::kOther:
      return absl::StatusCode::kUnknown;
  }
  return absl::StatusCode::kUnknown;
}

}  // namespace

absl::string_view ApiErrorKindName(ApiErrorKind kind) {
  switch (kind) {
    case ApiErrorKind::kNone:
      return "None";
    case ApiErrorKind::kBadRequest:
      return "BadRequest";
    case ApiErrorKind::kUnauthorized:
      return "Unauthorized";
    case ApiErrorKind::kForbidden:
      return "Forbidden";
    case ApiErrorKind::kNotFound:
      return "NotFound";
    case ApiErrorKind::kMethodNotAllowed:
      return "MethodNotAllowed";
    case ApiErrorKind::kNotAcceptable:
      return "NotAcceptable";
    case ApiErrorKind::kAlreadyExists:
      return "AlreadyExists";
    case ApiErrorKind::kConflict:
      return "Conflict";
    case ApiErrorKind::kGone:
      return "Gone";
    case ApiErrorKind::kInvalid:
      return "Invalid";
    case ApiErrorKind::kTooManyRequests:
      return "TooManyRequests";
    case ApiErrorKind::kServerError:
      return "ServerError";
    case ApiErrorKind::kNetwork:
      return "Network";
    case ApiErrorKind::kDecode:
      return "Decode";
    case ApiErrorKind::kOther:
      return "Other";
  }
  return "Other";
}

absl::Status StatusFromHttp(int http_code, absl::string_view body,
                            absl::string_view retry_after_header, absl::string_view what) {
  ErrorInfo info;
  info.http_code = http_code;
  std::string message;
  nlohmann::json status = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (StringAt(status, {"kind"}) == "Status") {
    if (status.contains("reason") && status["reason"].is_string()) {
      info.reason = status["reason"].get<std::string>();
    }
    if (status.contains("message") && status["message"].is_string()) {
      message = status["message"].get<std::string>();
    }
    if (status.contains("details") && status["details"].is_object()) {
      const nlohmann::json& details = status["details"];
      if (details.contains("retryAfterSeconds") && details["retryAfterSeconds"].is_number()) {
        info.retry_after_ms = details["retryAfterSeconds"].get<int64_t>() * 1000;
      }
    }
  } else {
    // An unknown API group answers text/plain "404 page not found".
    absl::string_view text = body.substr(0, 200);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
    message = std::string(text);
  }
  int64_t header_seconds = 0;
  if (!retry_after_header.empty() && absl::SimpleAtoi(retry_after_header, &header_seconds)) {
    info.retry_after_ms = header_seconds * 1000;
  }
  info.kind = KindForHttp(http_code, info.reason);
  std::string text = absl::StrCat(what, ": HTTP ", http_code,
                                  info.reason.empty() ? "" : absl::StrCat(" ", info.reason),
                                  message.empty() ? "" : absl::StrCat(": ", message));
  return Make(CodeFor(info.kind, http_code, info.reason), std::move(text), info);
}

absl::Status NetworkError(absl::string_view what, absl::string_view detail) {
  ErrorInfo info;
  info.kind = ApiErrorKind::kNetwork;
  return Make(absl::StatusCode::kUnavailable, absl::StrCat(what, ": network error: ", detail),
              info);
}

absl::Status DecodeError(absl::string_view what, absl::string_view detail) {
  ErrorInfo info;
  info.kind = ApiErrorKind::kDecode;
  return Make(absl::StatusCode::kDataLoss, absl::StrCat(what, ": bad response: ", detail), info);
}

ApiErrorKind KindOf(const absl::Status& status) {
  if (status.ok()) return ApiErrorKind::kNone;
  std::optional<ErrorInfo> info = InfoOf(status);
  return info ? info->kind : ApiErrorKind::kOther;
}

int HttpCodeOf(const absl::Status& status) {
  std::optional<ErrorInfo> info = InfoOf(status);
  return info ? info->http_code : 0;
}

std::string ReasonOf(const absl::Status& status) {
  std::optional<ErrorInfo> info = InfoOf(status);
  return info ? info->reason : "";
}

std::optional<absl::Duration> RetryAfter(const absl::Status& status) {
  std::optional<ErrorInfo> info = InfoOf(status);
  if (!info || info->retry_after_ms < 0) return std::nullopt;
  return absl::Milliseconds(info->retry_after_ms);
}

bool IsRetryable(const absl::Status& status) {
  switch (KindOf(status)) {
    case ApiErrorKind::kTooManyRequests:
    case ApiErrorKind::kServerError:
    case ApiErrorKind::kNetwork:
      return true;
    default:
      return false;
  }
}

}  // namespace kubetrain::kube
