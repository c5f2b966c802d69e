// Frames of the parameter server's tensor streams (Initialize, Push, Pull),
// encoded and decoded by hand straight between float buffers and
// grpc::ByteBuffer slices, without a protobuf `bytes` string in between.
//
// Wire compatibility: a frame is the protobuf encoding of v1::PushMessage or
// v1::PullMessage (parameter_server.proto), fields in field-number order, so
// a peer built on the generated protobuf stubs reads and writes the same
// methods unchanged. The encoder always writes TensorChunk.crc32c, even when
// the CRC is 0 (protobuf would leave a zero out; parsers read both). The
// decoder accepts any field order, skips unknown fields, and refuses
// malformed input (truncated varints or lengths, groups, a second chunk)
// with InvalidArgument.
//
// Encoding copies the floats once, into a new slice, computing the CRC-32C
// of the bytes in the same pass. Decoding copies them once, from the
// received slices into the caller's buffer, checking the size and the
// CRC-32C and counting NaN/Inf in the same pass. Thread-compatible.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_GRPC_FRAME_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_GRPC_FRAME_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "kubetrain/v1/parameter_server.pb.h"

namespace kubetrain::ps {

// Reuses the memory of encoded frames. A frame's slice returns its buffer
// here when gRPC (or a cached pull) lets go of it, so steady-state steps
// allocate nothing: fresh 1 MiB allocations from glibc's per-thread arenas
// came back as page faults every step (their heaps are unmapped when they
// empty, whatever M_TRIM_THRESHOLD says). Keeps at most `max_free` idle
// buffers. Thread-safe; slices may outlive the pool.
class FramePool {
 public:
  explicit FramePool(size_t max_free = 256);
  ~FramePool();
  FramePool(const FramePool&) = delete;
  FramePool& operator=(const FramePool&) = delete;

  // A slice of `size` bytes filled by `fill(uint8_t* data)`; from the pool
  // when `size` fits a pooled buffer.
  template <typename Fill>
  grpc::Slice Make(size_t size, Fill fill) {
    Lease lease = Take(size);
    fill(lease.data);
    return Wrap(lease, size);
  }

  size_t idle_buffers() const;

  struct State;  // shared with the buffers lent out

 private:
  struct Lease {
    uint8_t* data = nullptr;
    void* base = nullptr;  // null: not pooled (grpc_slice_malloc)
    grpc_slice plain;
  };
  Lease Take(size_t size);
  grpc::Slice Wrap(Lease& lease, size_t size);

  std::shared_ptr<State> state_;
};

// PullMessage's first-message fields.
struct PullFrameHead {
  int64_t global_step = 0;
  uint64_t incarnation = 0;
  bool finished = false;
};

// One PushMessage: `header` (first message of a push; null on the rest)
// and `values` as the chunk at range offset `offset`, encoded as `dtype`,
// then `pull` (PushPull streams: on each step's last message; null
// otherwise).
// `pool` (may be null) provides the slice's memory.
grpc::ByteBuffer EncodePushFrame(const v1::PushHeader* header, std::span<const float> values,
                                 int64_t offset, v1::WireDType dtype, FramePool* pool = nullptr,
                                 const v1::PullRequest* pull = nullptr);

// A whole push as frames: `values` (the range from `offset`) cut into
// chunks of kChunkElements, `header` on the first, `pull` (may be null) on
// the last, each handed to `write` in order. Stops at the first `write`
// that returns false (the peer ended the call) and returns false then.
bool WritePushFrames(const v1::PushHeader& header, std::span<const float> values, int64_t offset,
                     v1::WireDType dtype, FramePool* pool, const v1::PullRequest* pull,
                     const std::function<bool(const grpc::ByteBuffer&)>& write);

// One PullMessage: `head` (first message only; null on the rest) and the
// chunk.
grpc::ByteBuffer EncodePullFrame(const PullFrameHead* head, std::span<const float> values,
                                 int64_t offset, v1::WireDType dtype, FramePool* pool = nullptr);

// A received frame, parsed; its chunk's data still lies in the received
// slices until DecodeInto copies it out.
class ReceivedFrame {
 public:
  static absl::StatusOr<ReceivedFrame> ParsePush(const grpc::ByteBuffer& buffer);
  static absl::StatusOr<ReceivedFrame> ParsePull(const grpc::ByteBuffer& buffer);

  // Push frames.
  const std::optional<v1::PushHeader>& header() const { return header_; }
  const std::optional<v1::PullRequest>& pull() const { return pull_; }
  // Pull frames (zero when absent).
  const PullFrameHead& pull_head() const { return pull_head_; }

  bool has_chunk() const { return has_chunk_; }
  int64_t offset() const { return offset_; }
  int64_t length() const { return length_; }  // elements
  v1::WireDType dtype() const { return dtype_; }
  size_t data_bytes() const { return data_bytes_; }

  // Decodes the chunk into out[0..out.size()), which must be length()
  // elements: checks the dtype, the byte size and the CRC-32C, and adds the
  // number of NaN/Inf values to *nonfinite (when not null). On a checksum
  // failure `out` holds garbage: callers discard it (a failed push is never
  // committed; a failed pull is retried). Errors name the chunk's offset.
  absl::Status DecodeInto(std::span<float> out, int64_t* nonfinite) const;

 private:
  enum class Kind { kPush, kPull };
  static absl::StatusOr<ReceivedFrame> Parse(const grpc::ByteBuffer& buffer, Kind kind);

  std::vector<grpc::Slice> slices_;
  std::optional<v1::PushHeader> header_;
  std::optional<v1::PullRequest> pull_;
  PullFrameHead pull_head_;
  bool has_chunk_ = false;
  int64_t offset_ = 0;
  int64_t length_ = 0;
  v1::WireDType dtype_ = v1::WIRE_DTYPE_UNSPECIFIED;
  uint32_t crc32c_ = 0;
  // Where the data bytes start: slice index and position in it.
  size_t data_slice_ = 0;
  size_t data_pos_ = 0;
  size_t data_bytes_ = 0;
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_GRPC_FRAME_H_
