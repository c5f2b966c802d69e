// The parameter server's direct TCP data plane: the bytes on a connection.
// gRPC (grpc_shard_server.h) carries registration and control; a worker's steps
// can instead go over one plain TCP connection per shard, where the floats
// leave and land in place: the worker sends straight from its gradient and
// receives straight into its parameters, the server receives straight into
// the worker's staging slot. The checksum (CRC-32C) of each direction is
// computed piece by piece while the piece is in cache and travels after the
// payload, so no pass of its own over the data is needed.
//
// A connection (all integers little-endian, fixed size):
//   worker -> server  Hello (32 bytes) + token
//   server -> worker  Answer (64 bytes) + message: OK, or why not (then closed)
//                     An error answer's refusal byte (ps_refusal.h) says when
//                     the worker must act (register again), so the message is
//                     for people only.
//   per step:
//   worker -> server  StepHeader (64 bytes) + length values + Trailer (8 bytes)
//   server -> worker  Answer (64 bytes) + message; when OK the shard's
//                     parameters follow: length values + Trailer
// Values are the step header's dtype both ways: fp32, or IEEE binary16
// (`--wire-dtype fp16`, half_float.h); the checksums cover the bytes sent.
//
// A pipelined step (StepHeader::pipelined; only to a shard that advertised
// RegisterResponse.data_plane_pipeline) cuts the range into chunks of
// ChunkValues(length) values, each checksummed on its own, so the shard applies a
// sync step chunk by chunk as every worker's chunk arrives and the pull
// flows back while the push is still going:
//   worker -> server  StepHeader + per chunk: its values + Trailer
//   server -> worker  Frames, while the push is received:
//                     kChunk (values + Trailer) in chunk order, kRestart
//                     (the round was rolled back: chunks come again from 0),
//                     then kEnd followed by an Answer (has_params false) and
//                     its message. The step's parameters are the chunks
//                     received since the last kRestart, and count only when
//                     the answer is OK.
// Any error answer closes the connection; the worker opens a new one.
// Pure functions; thread-safe.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_TCP_WIRE_FORMAT_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_TCP_WIRE_FORMAT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/exchange/ps/ps_refusal.h"

namespace kubetrain::ps::data_plane {

// Checked in the hello: a peer of another version is refused with
// InvalidArgument naming both. 2 added the Answer's refusal byte.
inline constexpr uint32_t kVersion = 2;
inline constexpr size_t kHelloBytes = 32;
inline constexpr size_t kStepHeaderBytes = 64;
inline constexpr size_t kAnswerBytes = 64;
inline constexpr size_t kTrailerBytes = 8;
inline constexpr uint32_t kMaxTokenBytes = 4096;
inline constexpr uint32_t kMaxMessageBytes = 4096;
// Payloads are checksummed in pieces of this size as they are sent or
// received, so the checksum reads what the copy just brought into cache.
inline constexpr size_t kPieceBytes = 256 * 1024;
// A pipelined step's chunk for a range of `length` values, in values of
// any dtype (the last one shorter): about 1/32 of the range, a multiple of
// 4096 from kMinChunkValues to kMaxChunkValues, so a small range still
// overlaps in many chunks and a large one keeps per-chunk costs small.
inline constexpr int64_t kMinChunkValues = 16 * 1024;
inline constexpr int64_t kMaxChunkValues = 256 * 1024;
int64_t ChunkValues(int64_t length);
int64_t NumChunks(int64_t length);
inline constexpr size_t kFrameBytes = 16;

struct Hello {
  int32_t worker = 0;
  uint64_t incarnation = 0;  // the PS incarnation the worker registered with
  uint32_t token_bytes = 0;  // the token follows the hello
};

// A step's values on the wire (StepHeader::dtype).
enum class DType : uint32_t { kF32 = 0, kF16 = 1 };
size_t BytesPerValue(DType d);

struct StepHeader {
  int32_t worker = 0;
  int64_t step = 0;  // the worker's clock for this gradient (as PushHeader.step)
  uint64_t incarnation = 0;
  int64_t offset = 0;  // the shard's range, in floats: the payload's extent
  int64_t length = 0;
  int64_t min_step = 0;  // the pull that follows (as PullRequest)
  int64_t clock = 0;
  DType dtype = DType::kF32;  // of the push's values and the answer's
  bool pipelined = false;     // chunks, each with its trailer, both ways
};

// A frame of a pipelined step's answer stream.
struct Frame {
  enum class Kind : uint32_t { kChunk = 0, kRestart = 1, kEnd = 2 };
  Kind kind = Kind::kChunk;
  uint32_t index = 0;   // kChunk: which chunk
  uint32_t values = 0;  // kChunk: its length in values
};

struct Answer {
  absl::StatusCode code = absl::StatusCode::kOk;
  bool pushed = false;      // the step's push was committed (or was a duplicate)
  bool finished = false;    // every worker has finished
  bool has_params = false;  // `length` floats and a trailer follow
  int64_t global_step = 0;
  uint64_t incarnation = 0;
  int64_t offset = 0;
  int64_t length = 0;
  uint32_t message_bytes = 0;  // the message follows the answer
  // Why the shard refused, when the worker acts on it: one byte at offset 48
  // (then 3 zero bytes), kNone on OK answers.
  PsRefusal refusal = PsRefusal::kNone;
};

using HelloBytes = std::array<uint8_t, kHelloBytes>;
using StepHeaderBytes = std::array<uint8_t, kStepHeaderBytes>;
using AnswerBytes = std::array<uint8_t, kAnswerBytes>;
using TrailerBytes = std::array<uint8_t, kTrailerBytes>;
using FrameBytes = std::array<uint8_t, kFrameBytes>;

HelloBytes EncodeHello(const Hello& h);
// InvalidArgument for bytes that are no hello of this version, or a token
// longer than kMaxTokenBytes.
absl::StatusOr<Hello> DecodeHello(const HelloBytes& b);

StepHeaderBytes EncodeStepHeader(const StepHeader& h);
// InvalidArgument for bytes that are no step header, an empty or negative
// range, or a dtype this version does not know.
absl::StatusOr<StepHeader> DecodeStepHeader(const StepHeaderBytes& b);

// The answer's layout: magic, code, flags, message_bytes (4 bytes each),
// global_step, incarnation, offset, length (8 each), refusal (1), 15 zero.
AnswerBytes EncodeAnswer(const Answer& a);
// InvalidArgument for bytes that are no answer, an unknown code or refusal,
// or nonzero reserved bytes.
absl::StatusOr<Answer> DecodeAnswer(const AnswerBytes& b);

FrameBytes EncodeFrame(const Frame& f);
// InvalidArgument for bytes that are no frame, or a kind this version does
// not know.
absl::StatusOr<Frame> DecodeFrame(const FrameBytes& b);
// True when the bytes begin an Answer instead: a shard that refused a
// pipelined step before streaming (an older one, or a bad header) answers
// without a frame.
bool StartsAnAnswer(const FrameBytes& b);

TrailerBytes EncodeTrailer(uint32_t crc);
absl::StatusOr<uint32_t> DecodeTrailer(const TrailerBytes& b);

// The hello's token is checked by exchange::JobTokenAccepted (job_token.h).

}  // namespace kubetrain::ps::data_plane

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_TCP_WIRE_FORMAT_H_
