#include "runtime/exchange/ps/tcp_step_transport.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/crc32c.h"
#include "base/half_float.h"
#include "runtime/exchange/ps/ps_refusal.h"
#include "runtime/exchange/ps/tcp_wire_format.h"

namespace kubetrain::ps {
namespace {

namespace wire = data_plane;

// The shard answered its gRPC registration just before: its host is up, so
// a data port that does not answer this soon is filtered.
constexpr double kConnectSeconds = 3;
// As TcpShardServer's: a receive waiting on a shard whose host vanished fails
// about as soon as gRPC's keepalive would say so.
constexpr int kKeepAliveIdle = 20, kKeepAliveInterval = 5, kKeepAliveCount = 2;
// A step that waits longer than this asks the shard whether it restarted; a
// sync barrier normally releases within milliseconds, so a healthy job
// rarely asks at all.
constexpr std::chrono::seconds kAskAfter(1);
constexpr std::chrono::milliseconds kAnswerWithin(800);

exchange::IoCheck Within(double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  return [deadline] {
    return std::chrono::steady_clock::now() > deadline
               ? absl::DeadlineExceededError("the parameter server did not answer in time")
               : absl::OkStatus();
  };
}

wire::DType WireDType(v1::WireDType dtype) {
  return dtype == v1::WIRE_DTYPE_F16 ? wire::DType::kF16 : wire::DType::kF32;
}

}  // namespace

TcpStepTransport::TcpStepTransport(ShardClient& shard) : shard_(shard), name_(shard.name()) {
  int ignored = 0;
  if (!exchange::SplitHostPort(shard.address(), &host_, &ignored).ok()) host_.clear();
}

void TcpStepTransport::Offer(const v1::RegisterResponse& registration) {
  const int port = host_.empty() ? 0 : static_cast<int>(registration.data_port());
  fp16_ = registration.data_plane_fp16();
  pipeline_ = registration.data_plane_pipeline();
  range_length_ = static_cast<int64_t>(registration.range().length());
  if (port == port_) return;
  Close();
  port_ = port;
  unreachable_ = false;
  ever_connected_ = false;
}

bool TcpStepTransport::CanCarry(v1::WireDType dtype) const {
  return port_ != 0 && !unreachable_ &&
         (dtype == v1::WIRE_DTYPE_F32 || dtype == v1::WIRE_DTYPE_UNSPECIFIED ||
          (dtype == v1::WIRE_DTYPE_F16 && fp16_));
}

std::string TcpStepTransport::PortAddress() const {
  return host_.find(':') != std::string::npos ? absl::StrCat("[", host_, "]:", port_)
                                              : absl::StrCat(host_, ":", port_);
}

std::string TcpStepTransport::Describe() const {
  const bool pipelined = pipeline_ && range_length_ > wire::ChunkValues(range_length_);
  return absl::StrCat("the data plane at ", PortAddress(),
                      pipelined ? " (pipelined sync steps)" : "");
}

void TcpStepTransport::Close() { conn_ = exchange::TcpConnection(); }

absl::Status TcpStepTransport::Connect(int worker, uint64_t incarnation) {
  const std::string address = PortAddress();
  absl::StatusOr<exchange::TcpConnection> conn =
      exchange::TcpConnection::Connect(address, kConnectSeconds, {});
  if (!conn.ok()) {
    // Never reached: filtered, most likely; later failures are the shard's.
    if (!ever_connected_) unreachable_ = true;
    return absl::UnavailableError(absl::StrCat(name_, ": data plane at ", address,
                                               unreachable_ ? " unreachable: " : ": ",
                                               conn.status().message()));
  }
  conn->SetKeepAlive(kKeepAliveIdle, kKeepAliveInterval, kKeepAliveCount);
  wire::Hello hello;
  hello.worker = worker;
  hello.incarnation = incarnation;
  hello.token_bytes = static_cast<uint32_t>(shard_.token().size());
  const wire::HelloBytes hello_bytes = wire::EncodeHello(hello);
  const exchange::IoCheck check = Within(30);
  absl::Status s = conn->SendAll(hello_bytes.data(), hello_bytes.size(), shard_.token().data(),
                                 shard_.token().size(), check);
  wire::AnswerBytes answer_bytes;
  if (s.ok()) s = conn->RecvAll(answer_bytes.data(), answer_bytes.size(), check);
  if (!s.ok()) {
    return absl::UnavailableError(
        absl::StrCat(name_, ": data-plane handshake with ", address, ": ", s.message()));
  }
  absl::StatusOr<wire::Answer> answer = wire::DecodeAnswer(answer_bytes);
  if (!answer.ok()) {
    return absl::DataLossError(absl::StrCat(name_, ": ", answer.status().message()));
  }
  conn_ = std::move(*conn);
  if (answer->code != absl::StatusCode::kOk) {
    return ErrorFromAnswer(*answer);
  }
  ever_connected_ = true;
  return absl::OkStatus();
}

absl::Status TcpStepTransport::ErrorFromAnswer(const data_plane::Answer& answer) {
  std::string message(answer.message_bytes, '\0');
  if (!conn_.RecvAll(message.data(), message.size(), Within(5)).ok()) {
    message = "(the message was lost)";
  }
  Close();
  return WithPsRefusal(absl::Status(answer.code, message), answer.refusal);
}

exchange::IoCheck TcpStepTransport::StillTheSameShard(uint64_t incarnation) {
  auto next = std::chrono::steady_clock::now() + kAskAfter;
  return [this, incarnation, next]() mutable -> absl::Status {
    if (std::chrono::steady_clock::now() < next) return absl::OkStatus();
    absl::StatusOr<v1::StatusResponse> st = shard_.GetStatus(kAnswerWithin);
    next = std::chrono::steady_clock::now() + kAskAfter;
    // No answer says nothing: the link may be down while the shard waits
    // too; keepalive and the peer timeout decide that case.
    if (!st.ok() || st->incarnation() == incarnation) return absl::OkStatus();
    // Typed, so the worker re-registers at once; kept for Step, which
    // returns it however the connection ends.
    restarted_ = WithPsRefusal(absl::UnavailableError(absl::StrCat(
                                   name_, " restarted (incarnation ", incarnation, ", now ",
                                   st->incarnation(), ") while this step waited on it")),
                               PsRefusal::kStaleIncarnation);
    return restarted_;
  };
}

absl::StatusOr<PullReply> TcpStepTransport::Step(const v1::PushHeader& header,
                                                 std::span<const float> values,
                                                 const v1::PullRequest& pull, std::span<float> out,
                                                 int64_t offset, v1::WireDType dtype, bool* pushed,
                                                 const std::function<void()>& written) {
  *pushed = false;
  if (values.empty() || out.size() != values.size()) {
    return absl::InvalidArgumentError("data-plane step needs equal, non-empty ranges");
  }
  if (!conn_.valid()) {
    if (absl::Status s = Connect(header.worker(), header.incarnation()); !s.ok()) return s;
  }
  wire::StepHeader h;
  h.worker = header.worker();
  h.step = header.step();
  h.incarnation = header.incarnation();
  h.offset = offset;
  h.length = static_cast<int64_t>(values.size());
  h.min_step = pull.min_step();
  h.clock = pull.clock();
  h.dtype = WireDType(dtype);
  // A single chunk has nothing to overlap.
  h.pipelined = pipeline_ && h.length > wire::ChunkValues(h.length);
  restarted_ = absl::OkStatus();
  absl::StatusOr<PullReply> r =
      h.pipelined ? PipelinedStep(h, values, out, pushed, written, StillTheSameShard(h.incarnation))
                  : PlainStep(h, values, out, pushed, written, StillTheSameShard(h.incarnation));
  // The wait ended because the shard restarted: say that, typed, rather
  // than how the connection ended.
  if (!r.ok() && !restarted_.ok()) return restarted_;
  return r;
}

absl::StatusOr<PullReply> TcpStepTransport::PlainStep(const wire::StepHeader& h,
                                                      std::span<const float> values,
                                                      std::span<float> out, bool* pushed,
                                                      const std::function<void()>& written,
                                                      const exchange::IoCheck& waiting) {
  const wire::DType dtype = h.dtype;
  const int64_t offset = h.offset;
  const wire::StepHeaderBytes head = wire::EncodeStepHeader(h);
  // The header rides with the first piece; each piece is checksummed just
  // before it is sent, while it is in cache for the kernel's copy (fp16: as
  // converted into half_).
  const size_t piece = wire::kPieceBytes / wire::BytesPerValue(dtype);
  uint32_t crc = 0;
  absl::Status sent;
  for (size_t off = 0; off < values.size() && sent.ok(); off += piece) {
    const size_t n = std::min(piece, values.size() - off);
    const char* bytes = reinterpret_cast<const char*>(values.data() + off);
    if (dtype == wire::DType::kF16) {
      half_.resize(piece);
      base::FloatsToHalves(values.data() + off, n, half_.data());
      bytes = reinterpret_cast<const char*>(half_.data());
    }
    const size_t n_bytes = n * wire::BytesPerValue(dtype);
    crc = base::Crc32cExtend(crc, bytes, n_bytes);
    sent = off == 0 ? conn_.SendAll(head.data(), head.size(), bytes, n_bytes, waiting)
                    : conn_.SendAll(bytes, n_bytes, waiting);
  }
  if (sent.ok()) {
    const wire::TrailerBytes trailer = wire::EncodeTrailer(crc);
    sent = conn_.SendAll(trailer.data(), trailer.size(), waiting);
  }
  wire::AnswerBytes answer_bytes;
  // A shard that refused the step before reading it (a wrong size, say) has
  // answered and closed: its answer says more than the failed send.
  absl::Status got =
      conn_.RecvAll(answer_bytes.data(), answer_bytes.size(), sent.ok() ? waiting : Within(1));
  if (!sent.ok() && !got.ok()) {
    Close();
    return absl::UnavailableError(absl::StrCat(name_, ": data plane: ", sent.message()));
  }
  if (sent.ok() && written) written();
  if (!got.ok()) {
    Close();
    return absl::UnavailableError(absl::StrCat(name_, ": data plane: ", got.message()));
  }
  absl::StatusOr<wire::Answer> answer = wire::DecodeAnswer(answer_bytes);
  if (!answer.ok()) {
    Close();
    return absl::DataLossError(absl::StrCat(name_, ": ", answer.status().message()));
  }
  *pushed = answer->pushed;
  if (answer->code != absl::StatusCode::kOk) {
    return ErrorFromAnswer(*answer);
  }
  if (!answer->has_params || answer->offset != offset ||
      answer->length != static_cast<int64_t>(out.size())) {
    Close();
    return absl::DataLossError(absl::StrCat(name_, " answered with parameters [", answer->offset,
                                            ", +", answer->length, ") for the range [", offset,
                                            ", +", out.size(), ")"));
  }
  uint32_t got_crc = 0;
  for (size_t off = 0; off < out.size(); off += piece) {
    const size_t n = std::min(piece, out.size() - off);
    char* bytes = dtype == wire::DType::kF16 ? reinterpret_cast<char*>(half_.data())
                                             : reinterpret_cast<char*>(out.data() + off);
    const size_t n_bytes = n * wire::BytesPerValue(dtype);
    if (absl::Status s = conn_.RecvAll(bytes, n_bytes, waiting); !s.ok()) {
      Close();
      return absl::UnavailableError(absl::StrCat(name_, ": data plane: ", s.message()));
    }
    got_crc = base::Crc32cExtend(got_crc, bytes, n_bytes);
    if (dtype == wire::DType::kF16) {
      base::HalvesToFloats(half_.data(), n, out.data() + off);
    }
  }
  wire::TrailerBytes trailer;
  if (absl::Status s = conn_.RecvAll(trailer.data(), trailer.size(), waiting); !s.ok()) {
    Close();
    return absl::UnavailableError(absl::StrCat(name_, ": data plane: ", s.message()));
  }
  absl::StatusOr<uint32_t> want = wire::DecodeTrailer(trailer);
  if (!want.ok() || *want != got_crc) {
    Close();
    return want.ok() ? absl::DataLossError(
                           absl::StrCat(name_, ": parameters failed their checksum (CRC-32C ",
                                        absl::Hex(got_crc), ", sent ", absl::Hex(*want), ")"))
                     : absl::DataLossError(absl::StrCat(name_, ": ", want.status().message()));
  }
  return PullReply{answer->global_step, answer->incarnation, answer->finished};
}

absl::StatusOr<PullReply> TcpStepTransport::PipelinedStep(const wire::StepHeader& h,
                                                          std::span<const float> values,
                                                          std::span<float> out, bool* pushed,
                                                          const std::function<void()>& written,
                                                          const exchange::IoCheck& waiting) {
  const size_t bpv = wire::BytesPerValue(h.dtype);
  const bool half = h.dtype == wire::DType::kF16;
  const size_t chunk = static_cast<size_t>(wire::ChunkValues(h.length));
  const int64_t chunks = wire::NumChunks(h.length);
  // The push, on its own thread: each chunk checksummed just before it is
  // sent (fp16: as narrowed into the sender's own scratch).
  std::atomic<bool> receive_failed{false};
  absl::Status sent;
  std::thread sender([&] {
    const exchange::IoCheck check = [&] {
      return receive_failed ? absl::CancelledError("the answer failed") : absl::OkStatus();
    };
    const wire::StepHeaderBytes head = wire::EncodeStepHeader(h);
    std::vector<uint16_t> halves;
    for (size_t off = 0; off < values.size() && sent.ok(); off += chunk) {
      const size_t n = std::min(chunk, values.size() - off);
      const void* bytes = values.data() + off;
      if (half) {
        halves.resize(n);
        base::FloatsToHalves(values.data() + off, n, halves.data());
        bytes = halves.data();
      }
      const wire::TrailerBytes trailer = wire::EncodeTrailer(base::Crc32c(bytes, n * bpv));
      sent = off == 0 ? conn_.SendAll(head.data(), head.size(), bytes, n * bpv, check)
                      : conn_.SendAll(bytes, n * bpv, check);
      if (sent.ok()) sent = conn_.SendAll(trailer.data(), trailer.size(), check);
    }
    if (sent.ok() && written) written();
  });
  // The shard's frames: chunks in order (again from 0 after a restart),
  // then the end and the answer.
  int64_t next = 0;
  absl::Status received;
  wire::AnswerBytes answer_bytes;
  while (received.ok()) {
    wire::FrameBytes fb;
    received = conn_.RecvAll(fb.data(), fb.size(), waiting);
    if (!received.ok()) break;
    if (wire::StartsAnAnswer(fb)) {
      // Refused before streaming: the frame's bytes began the answer.
      std::copy(fb.begin(), fb.end(), answer_bytes.begin());
      received =
          conn_.RecvAll(answer_bytes.data() + fb.size(), answer_bytes.size() - fb.size(), waiting);
      break;
    }
    absl::StatusOr<wire::Frame> f = wire::DecodeFrame(fb);
    if (!f.ok()) {
      received = absl::DataLossError(absl::StrCat(name_, ": ", f.status().message()));
      break;
    }
    if (f->kind == wire::Frame::Kind::kEnd) {
      received = conn_.RecvAll(answer_bytes.data(), answer_bytes.size(), waiting);
      break;
    }
    if (f->kind == wire::Frame::Kind::kRestart) {
      next = 0;
      continue;
    }
    const size_t off = static_cast<size_t>(next) * chunk;
    const size_t n = next < chunks ? std::min(chunk, out.size() - off) : 0;
    if (static_cast<int64_t>(f->index) != next || f->values != n) {
      received =
          absl::DataLossError(absl::StrCat(name_, " sent chunk ", f->index, " of ", f->values,
                                           " values; expected chunk ", next, " of ", n));
      break;
    }
    void* bytes = out.data() + off;
    if (half) {
      half_.resize(n);
      bytes = half_.data();
    }
    wire::TrailerBytes trailer;
    received = conn_.RecvAll(bytes, n * bpv, waiting);
    if (received.ok()) received = conn_.RecvAll(trailer.data(), trailer.size(), waiting);
    if (!received.ok()) break;
    absl::StatusOr<uint32_t> want = wire::DecodeTrailer(trailer);
    const uint32_t crc = base::Crc32c(bytes, n * bpv);
    if (!want.ok() || *want != crc) {
      received =
          want.ok() ? absl::DataLossError(absl::StrCat(
                          name_, ": parameters of chunk ", next, " failed their checksum (CRC-32C ",
                          absl::Hex(crc), ", sent ", absl::Hex(*want), ")"))
                    : absl::DataLossError(absl::StrCat(name_, ": ", want.status().message()));
      break;
    }
    if (half) base::HalvesToFloats(half_.data(), n, out.data() + off);
    ++next;
  }
  // An answer other than OK can come while the push is still going (the
  // shard refused it, or stopped reading it): read its message, then end
  // the connection, so the sender does not wait on a window nobody drains.
  absl::StatusOr<wire::Answer> answer =
      received.ok() ? wire::DecodeAnswer(answer_bytes) : absl::StatusOr<wire::Answer>(received);
  std::string message;
  if (answer.ok() && answer->code != absl::StatusCode::kOk) {
    message.assign(answer->message_bytes, '\0');
    if (!conn_.RecvAll(message.data(), message.size(), Within(5)).ok()) {
      message = "(the message was lost)";
    }
  }
  if (!answer.ok() || answer->code != absl::StatusCode::kOk) {
    receive_failed = true;
    conn_.Shutdown();  // wakes the sender
  }
  sender.join();
  if (!received.ok()) {
    Close();
    return absl::IsDataLoss(received)
               ? received
               : absl::UnavailableError(absl::StrCat(name_, ": data plane: ", received.message()));
  }
  if (!answer.ok()) {
    Close();
    return absl::DataLossError(absl::StrCat(name_, ": ", answer.status().message()));
  }
  *pushed = answer->pushed;
  if (answer->code != absl::StatusCode::kOk) {
    Close();
    return WithPsRefusal(absl::Status(answer->code, message), answer->refusal);
  }
  if (!sent.ok()) {
    Close();
    return absl::UnavailableError(absl::StrCat(name_, ": data plane: ", sent.message()));
  }
  if (next != chunks) {
    Close();
    return absl::DataLossError(absl::StrCat(name_, " ended the step after ", next, " of ", chunks,
                                            " chunks of parameters"));
  }
  return PullReply{answer->global_step, answer->incarnation, answer->finished};
}

}  // namespace kubetrain::ps
