#include "tests/support/tensor_chunk_codec.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/crc32c.h"
#include "base/half_float.h"
#include "runtime/exchange/ps/wire_values.h"

namespace kubetrain::ps {

static uint32_t Checksum(const std::string& bytes) {
  return base::Crc32c(bytes.data(), bytes.size());
}

// Copies and checksums in blocks that stay in cache, so the checksum reads
// what the copy just touched instead of making a second pass over memory.
constexpr size_t kCopyBlock = 32 * 1024;

// memcpy(dst, src, n), returning the CRC-32C of the bytes.
static uint32_t CopyWithChecksum(char* dst, const char* src, size_t n) {
  uint32_t crc = 0;
  for (size_t off = 0; off < n; off += kCopyBlock) {
    const size_t len = std::min(kCopyBlock, n - off);
    std::memcpy(dst + off, src + off, len);
    crc = base::Crc32cExtend(crc, dst + off, len);
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
    base::FloatsToHalves(values.data(), values.size(), out);
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
    base::HalvesToFloats(in, out.size(), out.data());
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
