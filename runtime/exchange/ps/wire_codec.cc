#include "runtime/exchange/ps/wire_codec.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/exchange/crc32c.h"

namespace kubetrain::ps {

uint16_t FloatToHalf(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // Inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> Inf
  if (abs < 0x38800000u) {                                               // subnormal half (or zero)
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);           // rounds to 0
    const uint32_t mant = (abs & 0x007fffffu) | 0x00800000u;
    const int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  // Normal: rebias exponent, round mantissa to 10 bits (nearest even).
  uint32_t h = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalise
      int e = -1;
      uint32_t m = mant;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400u) == 0);
      x = sign | ((112u - static_cast<uint32_t>(e)) << 23) | ((m & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(x);
}

absl::StatusOr<v1::WireDType> ParseWireDType(const std::string& name) {
  if (name == "fp32") return v1::WIRE_DTYPE_F32;
  if (name == "fp16") return v1::WIRE_DTYPE_F16;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown wire dtype '", name, "' (known: fp32, fp16)"));
}

size_t WireBytesPerElement(v1::WireDType dtype) { return dtype == v1::WIRE_DTYPE_F16 ? 2 : 4; }

static uint32_t Checksum(const std::string& bytes) { return Crc32c(bytes.data(), bytes.size()); }

// Copies and checksums in blocks that stay in cache, so the checksum reads
// what the copy just touched instead of making a second pass over memory.
constexpr size_t kCopyBlock = 32 * 1024;

// memcpy(dst, src, n), returning the CRC-32C of the bytes.
static uint32_t CopyWithChecksum(char* dst, const char* src, size_t n) {
  uint32_t crc = 0;
  for (size_t off = 0; off < n; off += kCopyBlock) {
    const size_t len = std::min(kCopyBlock, n - off);
    std::memcpy(dst + off, src + off, len);
    crc = Crc32cExtend(crc, dst + off, len);
  }
  return crc;
}

void EncodeChunk(std::span<const float> values, int64_t offset, v1::WireDType dtype,
                 v1::TensorChunk* chunk) {
  chunk->mutable_range()->set_offset(static_cast<uint64_t>(offset));
  chunk->mutable_range()->set_length(values.size());
  chunk->set_dtype(dtype);
  std::string* data = chunk->mutable_data();
  if (dtype == v1::WIRE_DTYPE_F16) {
    data->resize(values.size() * 2);
    auto* out = reinterpret_cast<uint16_t*>(data->data());
    for (size_t i = 0; i < values.size(); ++i) out[i] = FloatToHalf(values[i]);
    chunk->set_crc32c(Checksum(*data));
  } else {
    data->resize(values.size() * sizeof(float));
    chunk->set_crc32c(
        CopyWithChecksum(data->data(), reinterpret_cast<const char*>(values.data()), data->size()));
  }
}

absl::Status DecodeChunk(const v1::TensorChunk& chunk, std::span<float> out) {
  const v1::WireDType dtype = chunk.dtype();
  if (dtype != v1::WIRE_DTYPE_F32 && dtype != v1::WIRE_DTYPE_F16) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported wire dtype ", dtype));
  }
  const size_t want = out.size() * WireBytesPerElement(dtype);
  if (chunk.data().size() != want) {
    return absl::InvalidArgumentError(absl::StrCat("chunk at offset ", chunk.range().offset(),
                                                   " has ", chunk.data().size(),
                                                   " bytes, expected ", want));
  }
  const auto corrupt = [&] {
    return absl::DataLossError(
        absl::StrCat("chunk at offset ", chunk.range().offset(), " failed its checksum"));
  };
  if (dtype == v1::WIRE_DTYPE_F16) {
    if (Checksum(chunk.data()) != chunk.crc32c()) return corrupt();
    const auto* in = reinterpret_cast<const uint16_t*>(chunk.data().data());
    for (size_t i = 0; i < out.size(); ++i) out[i] = HalfToFloat(in[i]);
    return absl::OkStatus();
  }
  // Copy first, then verify: on a mismatch the destination holds garbage,
  // which callers discard (a failed push is never committed).
  if (CopyWithChecksum(reinterpret_cast<char*>(out.data()), chunk.data().data(), want) !=
      chunk.crc32c()) {
    return corrupt();
  }
  return absl::OkStatus();
}

}  // namespace kubetrain::ps
