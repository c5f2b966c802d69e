// Encoding of float ranges on the wire: raw little-endian float32, or IEEE
// binary16 (`--wire-dtype fp16`, half the bytes, relative error <= 2^-11
// for normal values, round-to-nearest-even). Pure functions; thread-safe.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_WIRE_CODEC_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_WIRE_CODEC_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "kubetrain/v1/tensor.pb.h"
#include "base/half_float.h"

namespace kubetrain::ps {

using base::FloatToHalf;
using base::HalfToFloat;

absl::StatusOr<v1::WireDType> ParseWireDType(const std::string& name);  // "fp32" | "fp16"
size_t WireBytesPerElement(v1::WireDType dtype);

// Elements per chunk: chunks stay well under gRPC's message limits and let
// the receiver apply one while the next is in flight.
constexpr int64_t kChunkElements = 256 * 1024;

// Fills `chunk` with values[0..n) encoded as `dtype`, for range offset
// `offset`, with the CRC-32C of the bytes.
void EncodeChunk(std::span<const float> values, int64_t offset, v1::WireDType dtype,
                 v1::TensorChunk* chunk);

// NaN and Inf values among v[0..n): the bits of the exponent all set.
int64_t CountNonFinite(const float* v, size_t n);

// Decodes `chunk` into out[0..length). Checks dtype, byte size and checksum.
absl::Status DecodeChunk(const v1::TensorChunk& chunk, std::span<float> out);

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_WIRE_CODEC_H_
