#include "runtime/exchange/job_token.h"

#include <cstddef>

#include "absl/strings/str_cat.h"
#include "api/env_vars.h"

namespace kubetrain::exchange {

bool JobTokenAccepted(absl::string_view expected, absl::string_view presented) {
  if (expected.empty()) return true;
  if (presented.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    diff |= static_cast<unsigned char>(expected[i] ^ presented[i]);
  }
  return diff == 0;
}

absl::Status WrongJobTokenError() {
  return absl::UnauthenticatedError(
      absl::StrCat("missing or wrong job token (", api::kEnvJobToken, ")"));
}

}  // namespace kubetrain::exchange
