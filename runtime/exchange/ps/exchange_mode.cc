#include "runtime/exchange/ps/exchange_mode.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kubetrain::ps {

std::string ExchangeMode::ToString() const {
  switch (kind) {
    case kSync:
      return "sync";
    case kAsync:
      return "async";
    case kSsp:
      return absl::StrCat("ssp:", ssp_bound);
  }
  return "?";
}

absl::StatusOr<ExchangeMode> ExchangeMode::Parse(const std::string& text) {
  ExchangeMode m;
  if (text == "sync") return m;
  if (text == "async") {
    m.kind = kAsync;
    return m;
  }
  if (text.rfind("ssp:", 0) == 0 && absl::SimpleAtoi(text.substr(4), &m.ssp_bound) &&
      m.ssp_bound >= 0) {
    m.kind = kSsp;
    return m;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown exchange mode '", text, "' (sync, async, ssp:<bound>)"));
}

}  // namespace kubetrain::ps
