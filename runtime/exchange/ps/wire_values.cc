#include "runtime/exchange/ps/wire_values.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kubetrain::ps {

absl::StatusOr<v1::WireDType> ParseWireDType(const std::string& name) {
  if (name == "fp32") return v1::WIRE_DTYPE_F32;
  if (name == "fp16") return v1::WIRE_DTYPE_F16;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown wire dtype '", name, "' (known: fp32, fp16)"));
}

size_t WireBytesPerElement(v1::WireDType dtype) { return dtype == v1::WIRE_DTYPE_F16 ? 2 : 4; }

int64_t CountNonFinite(const float* v, size_t n) {
  int64_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, v + i, sizeof(bits));
    bad += (bits & 0x7f800000u) == 0x7f800000u ? 1 : 0;
  }
  return bad;
}

}  // namespace kubetrain::ps
