#include "runtime/exchange/ps/tcp_wire_format.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/little_endian.h"

namespace kubetrain::ps::data_plane {
namespace {

constexpr uint32_t kHelloMagic = 0x4450544b;    // "KTPD"
constexpr uint32_t kStepMagic = 0x5350544b;     // "KTPS"
constexpr uint32_t kAnswerMagic = 0x5250544b;   // "KTPR"
constexpr uint32_t kTrailerMagic = 0x5450544b;  // "KTPT"
constexpr uint32_t kFrameMagic = 0x4650544b;    // "KTPF"

constexpr uint32_t kStepPipelined = 1;

constexpr uint32_t kPushed = 1;
constexpr uint32_t kFinished = 2;
constexpr uint32_t kHasParams = 4;

// Little-endian puts and gets at a moving position; the values that follow
// the headers are the host's IEEE-754 floats, little-endian by this check.
static_assert(base::kHostIsLittleEndian, "the data plane's values are little-endian floats");

class Writer {
 public:
  explicit Writer(uint8_t* p) : p_(p) {}
  template <typename T>
  void Put(T v) {
    base::PutLittleEndian(p_, v);
    p_ += sizeof(v);
  }

 private:
  uint8_t* p_;
};

class Reader {
 public:
  explicit Reader(const uint8_t* p) : p_(p) {}
  template <typename T>
  T Get() {
    const T v = base::GetLittleEndian<T>(p_);
    p_ += sizeof(v);
    return v;
  }

 private:
  const uint8_t* p_;
};

absl::Status BadMagic(const char* what, uint32_t got, uint32_t want) {
  return absl::InvalidArgumentError(absl::StrCat("not a kubetrain PS data-plane ", what, " (magic ",
                                                 absl::Hex(got), ", want ", absl::Hex(want), ")"));
}

}  // namespace

int64_t ChunkValues(int64_t length) {
  const int64_t want = (length / 32 + 4095) / 4096 * 4096;
  return std::clamp(want, kMinChunkValues, kMaxChunkValues);
}

int64_t NumChunks(int64_t length) {
  const int64_t chunk = ChunkValues(length);
  return (length + chunk - 1) / chunk;
}

size_t BytesPerValue(DType d) { return d == DType::kF16 ? sizeof(uint16_t) : sizeof(float); }

HelloBytes EncodeHello(const Hello& h) {
  HelloBytes b{};
  Writer w(b.data());
  w.Put(kHelloMagic);
  w.Put(kVersion);
  w.Put(h.worker);
  w.Put(h.token_bytes);
  w.Put(h.incarnation);
  return b;
}

absl::StatusOr<Hello> DecodeHello(const HelloBytes& b) {
  Reader r(b.data());
  const uint32_t magic = r.Get<uint32_t>();
  if (magic != kHelloMagic) return BadMagic("hello", magic, kHelloMagic);
  const uint32_t version = r.Get<uint32_t>();
  if (version != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("PS data-plane version ", version, " is not this server's ", kVersion));
  }
  Hello h;
  h.worker = r.Get<int32_t>();
  h.token_bytes = r.Get<uint32_t>();
  h.incarnation = r.Get<uint64_t>();
  if (h.token_bytes > kMaxTokenBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a token of ", h.token_bytes, " bytes (at most ", kMaxTokenBytes, ")"));
  }
  return h;
}

StepHeaderBytes EncodeStepHeader(const StepHeader& h) {
  StepHeaderBytes b{};
  Writer w(b.data());
  w.Put(kStepMagic);
  w.Put(h.worker);
  w.Put(h.step);
  w.Put(h.incarnation);
  w.Put(h.offset);
  w.Put(h.length);
  w.Put(h.min_step);
  w.Put(h.clock);
  w.Put(static_cast<uint32_t>(h.dtype));
  w.Put(h.pipelined ? kStepPipelined : 0u);
  return b;
}

absl::StatusOr<StepHeader> DecodeStepHeader(const StepHeaderBytes& b) {
  Reader r(b.data());
  const uint32_t magic = r.Get<uint32_t>();
  if (magic != kStepMagic) return BadMagic("step header", magic, kStepMagic);
  StepHeader h;
  h.worker = r.Get<int32_t>();
  h.step = r.Get<int64_t>();
  h.incarnation = r.Get<uint64_t>();
  h.offset = r.Get<int64_t>();
  h.length = r.Get<int64_t>();
  h.min_step = r.Get<int64_t>();
  h.clock = r.Get<int64_t>();
  const uint32_t dtype = r.Get<uint32_t>();
  const uint32_t flags = r.Get<uint32_t>();
  if ((flags & ~kStepPipelined) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("step header with unknown flags ", flags));
  }
  h.pipelined = (flags & kStepPipelined) != 0;
  if (h.offset < 0 || h.length <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("step header with range [", h.offset, ", +", h.length, ")"));
  }
  if (dtype != static_cast<uint32_t>(DType::kF32) && dtype != static_cast<uint32_t>(DType::kF16)) {
    return absl::InvalidArgumentError(absl::StrCat("step header with unknown dtype ", dtype));
  }
  h.dtype = static_cast<DType>(dtype);
  return h;
}

AnswerBytes EncodeAnswer(const Answer& a) {
  AnswerBytes b{};
  Writer w(b.data());
  w.Put(kAnswerMagic);
  w.Put(static_cast<int32_t>(a.code));
  w.Put((a.pushed ? kPushed : 0) | (a.finished ? kFinished : 0) | (a.has_params ? kHasParams : 0));
  w.Put(a.message_bytes);
  w.Put(a.global_step);
  w.Put(a.incarnation);
  w.Put(a.offset);
  w.Put(a.length);
  w.Put(static_cast<uint8_t>(a.refusal));
  return b;
}

absl::StatusOr<Answer> DecodeAnswer(const AnswerBytes& b) {
  Reader r(b.data());
  const uint32_t magic = r.Get<uint32_t>();
  if (magic != kAnswerMagic) return BadMagic("answer", magic, kAnswerMagic);
  Answer a;
  const int32_t code = r.Get<int32_t>();
  if (code < 0 || code > static_cast<int32_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::InvalidArgumentError(absl::StrCat("answer with status code ", code));
  }
  a.code = static_cast<absl::StatusCode>(code);
  const uint32_t flags = r.Get<uint32_t>();
  a.pushed = (flags & kPushed) != 0;
  a.finished = (flags & kFinished) != 0;
  a.has_params = (flags & kHasParams) != 0;
  a.message_bytes = r.Get<uint32_t>();
  a.global_step = r.Get<int64_t>();
  a.incarnation = r.Get<uint64_t>();
  a.offset = r.Get<int64_t>();
  a.length = r.Get<int64_t>();
  const uint8_t refusal = r.Get<uint8_t>();
  if (refusal > kMaxPsRefusal) {
    return absl::InvalidArgumentError(absl::StrCat("answer with unknown refusal ", refusal));
  }
  a.refusal = static_cast<PsRefusal>(refusal);
  for (size_t i = 49; i < kAnswerBytes; ++i) {
    if (b[i] != 0) {
      return absl::InvalidArgumentError(absl::StrCat("answer with reserved byte ", i, " set"));
    }
  }
  if (a.message_bytes > kMaxMessageBytes) {
    return absl::InvalidArgumentError(absl::StrCat("answer with a message of ", a.message_bytes,
                                                   " bytes (at most ", kMaxMessageBytes, ")"));
  }
  if (a.has_params && (a.offset < 0 || a.length <= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("answer with parameters [", a.offset, ", +", a.length, ")"));
  }
  return a;
}

FrameBytes EncodeFrame(const Frame& f) {
  FrameBytes b{};
  Writer w(b.data());
  w.Put(kFrameMagic);
  w.Put(static_cast<uint32_t>(f.kind));
  w.Put(f.index);
  w.Put(f.values);
  return b;
}

absl::StatusOr<Frame> DecodeFrame(const FrameBytes& b) {
  Reader r(b.data());
  const uint32_t magic = r.Get<uint32_t>();
  if (magic != kFrameMagic) return BadMagic("frame", magic, kFrameMagic);
  const uint32_t kind = r.Get<uint32_t>();
  if (kind > static_cast<uint32_t>(Frame::Kind::kEnd)) {
    return absl::InvalidArgumentError(absl::StrCat("frame of unknown kind ", kind));
  }
  Frame f;
  f.kind = static_cast<Frame::Kind>(kind);
  f.index = r.Get<uint32_t>();
  f.values = r.Get<uint32_t>();
  if (f.kind == Frame::Kind::kChunk &&
      (f.values == 0 || f.values > static_cast<uint32_t>(kMaxChunkValues))) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk frame of ", f.values, " values (1 to ", kMaxChunkValues, ")"));
  }
  return f;
}

bool StartsAnAnswer(const FrameBytes& b) {
  Reader r(b.data());
  return r.Get<uint32_t>() == kAnswerMagic;
}

TrailerBytes EncodeTrailer(uint32_t crc) {
  TrailerBytes b{};
  Writer w(b.data());
  w.Put(kTrailerMagic);
  w.Put(crc);
  return b;
}

absl::StatusOr<uint32_t> DecodeTrailer(const TrailerBytes& b) {
  Reader r(b.data());
  const uint32_t magic = r.Get<uint32_t>();
  if (magic != kTrailerMagic) {
    return absl::DataLossError(absl::StrCat("payload not followed by its checksum trailer (",
                                            absl::Hex(magic), "): the stream lost its framing"));
  }
  return r.Get<uint32_t>();
}

}  // namespace kubetrain::ps::data_plane
