// Float ranges on the wire, whatever the transport: raw little-endian
// float32, or IEEE binary16 (`--wire-dtype fp16`, half the bytes, relative
// error <= 2^-11 for normal values, round-to-nearest-even); the chunk size;
// the NaN/Inf count every push is checked with. The bytes themselves are
// grpc_frame.h's (gRPC) and tcp_wire_format.h's (the TCP data plane).
// Pure functions; thread-safe.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_WIRE_VALUES_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_WIRE_VALUES_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "base/half_float.h"
#include "kubetrain/v1/tensor.pb.h"

namespace kubetrain::ps {

using base::FloatToHalf;
using base::HalfToFloat;

absl::StatusOr<v1::WireDType> ParseWireDType(const std::string& name);  // "fp32" | "fp16"
size_t WireBytesPerElement(v1::WireDType dtype);

// Elements per chunk: chunks stay well under gRPC's message limits and let
// the receiver apply one while the next is in flight.
constexpr int64_t kChunkElements = 256 * 1024;

// NaN and Inf values among v[0..n): the bits of the exponent all set.
int64_t CountNonFinite(const float* v, size_t n);

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_WIRE_VALUES_H_
