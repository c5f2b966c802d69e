// TensorChunk through the generated protobuf code: the reference the
// hand-encoded gRPC frames (runtime/exchange/ps/grpc_frame.h) must match
// byte for byte, and what tests that speak to a shard through generated
// stubs send. Test-only: the runtime never builds a TensorChunk message.
#ifndef KUBETRAIN_TESTS_SUPPORT_TENSOR_CHUNK_CODEC_H_
#define KUBETRAIN_TESTS_SUPPORT_TENSOR_CHUNK_CODEC_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "kubetrain/v1/tensor.pb.h"

namespace kubetrain::ps {

// Fills `chunk` with values[0..n) encoded as `dtype`, for range offset
// `offset`, with the CRC-32C of the bytes.
void EncodeChunk(std::span<const float> values, int64_t offset, v1::WireDType dtype,
                 v1::TensorChunk* chunk);

// Decodes `chunk` into out[0..length). Checks dtype, byte size and checksum.
absl::Status DecodeChunk(const v1::TensorChunk& chunk, std::span<float> out);

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_TESTS_SUPPORT_TENSOR_CHUNK_CODEC_H_
