#include "tools/node_agent/quantity.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kubetrain::node_agent {
namespace {

// Suffixes of resource.Quantity (k8s.io/apimachinery): binary SI, decimal
// SI, and "m" (milli).
bool SuffixMultiplier(absl::string_view suffix, long double* out) {
  static const std::pair<absl::string_view, long double> kSuffixes[] = {
      {"", 1.0L},
      {"m", 1e-3L},
      {"k", 1e3L},
      {"M", 1e6L},
      {"G", 1e9L},
      {"T", 1e12L},
      {"P", 1e15L},
      {"E", 1e18L},
      {"Ki", 1024.0L},
      {"Mi", 1024.0L * 1024},
      {"Gi", 1024.0L * 1024 * 1024},
      {"Ti", 1024.0L * 1024 * 1024 * 1024},
      {"Pi", 1024.0L * 1024 * 1024 * 1024 * 1024},
      {"Ei", 1024.0L * 1024 * 1024 * 1024 * 1024 * 1024},
  };
  for (const auto& [name, multiplier] : kSuffixes) {
    if (suffix == name) {
      *out = multiplier;
      return true;
    }
  }
  // Decimal exponent: "1e3", "5E-1".
  if (suffix.size() >= 2 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    int exponent = 0;
    if (!absl::SimpleAtoi(suffix.substr(1), &exponent) || exponent < -18 || exponent > 18) {
      return false;
    }
    *out = std::pow(10.0L, exponent);
    return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<int64_t> ParseQuantity(absl::string_view text, int64_t scale) {
  size_t end = 0;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) ||
                               text[end] == '.' || (end == 0 && text[end] == '+'))) {
    ++end;
  }
  absl::string_view number = text.substr(0, end);
  long double multiplier = 0;
  double value = 0;
  if (number.empty() || !absl::SimpleAtod(number, &value) || !std::isfinite(value) ||
      !SuffixMultiplier(text.substr(end), &multiplier)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not a Kubernetes quantity (e.g. 500m, 2, 512Mi, 1Gi)"));
  }
  const long double scaled = static_cast<long double>(value) * multiplier * scale;
  if (scaled > static_cast<long double>(std::numeric_limits<int64_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("quantity \"", text, "\" is too large"));
  }
  // Round up, ignoring the error of the binary representation of decimals.
  return static_cast<int64_t>(std::ceil(scaled - 1e-9L));
}

}  // namespace kubetrain::node_agent
