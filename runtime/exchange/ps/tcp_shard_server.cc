#include "runtime/exchange/ps/tcp_shard_server.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/crc32c.h"
#include "base/half_float.h"
#include "runtime/exchange/ps/ps_refusal.h"
#include "runtime/exchange/ps/tcp_wire_format.h"
#include "runtime/exchange/ps/wire_values.h"
#include "runtime/tensor/denormals.h"

namespace kubetrain::ps {
namespace {

using exchange::TcpConnection;
namespace wire = data_plane;

// A hello must arrive this soon after the connection.
constexpr double kHelloSeconds = 10;
// Keepalive on every data connection: a worker whose host vanished is
// noticed about as soon as gRPC's keepalive (20 s + 10 s) would.
constexpr int kKeepAliveIdle = 20, kKeepAliveInterval = 5, kKeepAliveCount = 2;

// Sends `a` with `status`'s code and message (none when OK), after a
// pipelined step's end frame when `end_frame`. Sent even while the server
// stops (a worker must learn why its step failed), but given up on a peer
// not reading for 2 s.
absl::Status SendAnswer(TcpConnection& conn, wire::Answer a, const absl::Status& status,
                        bool end_frame) {
  const auto stop_soon = [deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2)] {
    return std::chrono::steady_clock::now() > deadline
               ? absl::DeadlineExceededError("peer not reading")
               : absl::OkStatus();
  };
  const std::string message(status.message().substr(0, wire::kMaxMessageBytes));
  a.code = status.code();
  a.refusal = PsRefusalOf(status);
  a.message_bytes = static_cast<uint32_t>(message.size());
  uint8_t head[wire::kFrameBytes + wire::kAnswerBytes];
  size_t head_bytes = 0;
  if (end_frame) {
    wire::Frame end;
    end.kind = wire::Frame::Kind::kEnd;
    const wire::FrameBytes frame = wire::EncodeFrame(end);
    head_bytes = std::copy(frame.begin(), frame.end(), head) - head;
  }
  const wire::AnswerBytes answer = wire::EncodeAnswer(a);
  head_bytes = std::copy(answer.begin(), answer.end(), head + head_bytes) - head;
  return conn.SendAll(head, head_bytes, message.data(), message.size(), stop_soon);
}

// An error answer (best effort: the peer may be gone) and its message.
void SendError(TcpConnection& conn, const absl::Status& status, bool pushed, uint64_t incarnation) {
  wire::Answer a;
  a.pushed = pushed;
  a.incarnation = incarnation;
  SendAnswer(conn, a, status.ok() ? absl::InternalError("") : status, /*end_frame=*/false)
      .IgnoreError();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpShardServer>> TcpShardServer::Start(ShardSession& session,
                                                                      const std::string& host) {
  absl::StatusOr<exchange::TcpListener> listener = exchange::TcpListener::Listen(host, 0);
  if (!listener.ok()) {
    return absl::Status(listener.status().code(),
                        absl::StrCat("PS data plane: ", listener.status().message()));
  }
  std::unique_ptr<TcpShardServer> s(new TcpShardServer(session, std::move(*listener)));
  s->accept_thread_ = std::thread([p = s.get()] { p->AcceptLoop(); });
  return s;
}

TcpShardServer::TcpShardServer(ShardSession& session, exchange::TcpListener listener)
    : session_(session), listener_(std::move(listener)), port_(listener_.port()) {}

TcpShardServer::~TcpShardServer() { Stop(); }

int TcpShardServer::MaxConnections() const {
  return 4 * session_.shard().options().num_workers + 16;
}

int TcpShardServer::connections() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& c : connections_) n += c->done ? 0 : 1;
  return n;
}

void TcpShardServer::Stop() {
  stopping_ = true;
  if (accept_thread_.joinable()) accept_thread_.join();
  // First let each connection end by itself, so a worker waiting for its
  // pull gets the shard's last word (Abort's reason: a lost peer makes it
  // exit 129, as over gRPC) instead of a reset it would retry: waits end
  // within 100 ms of stopping_, as gRPC's Shutdown lets calls finish.
  const auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (connections() > 0 && std::chrono::steady_clock::now() < grace) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::list<std::unique_ptr<Connection>> all;
  {
    absl::MutexLock lock(&mu_);
    for (auto& c : connections_) c->conn.Shutdown();  // wakes a blocked receive or send
    all.swap(connections_);
  }
  // A thread waiting in PsShard::Read sees stopping_ within 100 ms.
  for (auto& c : all) {
    if (c->thread.joinable()) c->thread.join();
  }
}

void TcpShardServer::ReapFinished() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if ((*it)->done) {
      if ((*it)->thread.joinable()) (*it)->thread.join();
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

void TcpShardServer::AcceptLoop() {
  const auto check = [this] {
    return stopping_ ? absl::CancelledError("stopping") : absl::OkStatus();
  };
  while (!stopping_) {
    absl::StatusOr<TcpConnection> conn = listener_.Accept(1.0, check);
    if (!conn.ok()) continue;  // the timeout, a stop, or a connection reset before accept
    absl::MutexLock lock(&mu_);
    ReapFinished();
    if (stopping_) break;
    if (static_cast<int>(connections_.size()) >= MaxConnections()) {
      const absl::Status full =
          session_.Reject(metrics::RejectReason::kBadHeader,
                          absl::ResourceExhaustedError(absl::StrCat(
                              "parameter server data plane: ", connections_.size(),
                              " connections already open (at most ", MaxConnections(), ")")));
      SendError(*conn, full, false, session_.incarnation());
      continue;  // closed as `conn` goes
    }
    auto c = std::make_unique<Connection>();
    c->conn = std::move(*conn);
    c->conn.SetKeepAlive(kKeepAliveIdle, kKeepAliveInterval, kKeepAliveCount);
    Connection* raw = c.get();
    connections_.push_back(std::move(c));
    raw->thread = std::thread([this, raw] {
      FlushDenormalsInThisThread();
      Serve(*raw);
      // Ended: a worker still sending a push the shard refused before
      // reading it all sees the connection end instead of a full window.
      raw->conn.Shutdown();
      raw->done = true;
    });
  }
}

void TcpShardServer::Serve(Connection& c) {
  TcpConnection& conn = c.conn;
  const uint64_t incarnation = session_.incarnation();
  const auto hello_deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(kHelloSeconds);
  const auto hello_check = [&] {
    if (stopping_) return absl::CancelledError("stopping");
    return std::chrono::steady_clock::now() > hello_deadline
               ? absl::DeadlineExceededError("no hello")
               : absl::OkStatus();
  };
  wire::HelloBytes hello_bytes;
  if (!conn.RecvAll(hello_bytes.data(), hello_bytes.size(), hello_check).ok()) return;
  absl::StatusOr<wire::Hello> hello = wire::DecodeHello(hello_bytes);
  if (!hello.ok()) {
    SendError(
        conn,
        session_.Reject(metrics::RejectReason::kBadHeader, hello.status(), "data-plane connection"),
        false, incarnation);
    return;
  }
  std::string token(hello->token_bytes, '\0');
  if (!conn.RecvAll(token.data(), token.size(), hello_check).ok()) return;
  if (absl::Status s = session_.AdmitConnection(hello->worker, hello->incarnation, token);
      !s.ok()) {
    SendError(conn, s, false, incarnation);
    return;
  }
  wire::Answer ok;
  ok.incarnation = incarnation;
  const wire::AnswerBytes ok_bytes = wire::EncodeAnswer(ok);
  if (!conn.SendAll(ok_bytes.data(), ok_bytes.size(), hello_check).ok()) return;
  Scratch scratch;
  while (!stopping_ && Step(conn, hello->worker, scratch)) {
  }
}

absl::Status TcpShardServer::ReceiveValues(TcpConnection& conn, float* to, size_t n,
                                           wire::DType dtype, bool drop, Scratch& scratch,
                                           const exchange::IoCheck& check, uint32_t* crc,
                                           int64_t* nonfinite) {
  const bool half = dtype == wire::DType::kF16;
  const size_t bytes = n * wire::BytesPerValue(dtype);
  void* wire_to = half ? static_cast<void*>(scratch.half.data()) : static_cast<void*>(to);
  if (absl::Status s = conn.RecvAll(wire_to, bytes, check); !s.ok()) return s;
  *crc = base::Crc32cExtend(*crc, wire_to, bytes);
  if (drop) return absl::OkStatus();
  if (half) base::HalvesToFloats(scratch.half.data(), n, to);
  *nonfinite += CountNonFinite(to, n);
  return absl::OkStatus();
}

bool TcpShardServer::Step(TcpConnection& conn, int worker, Scratch& scratch) {
  const uint64_t incarnation = session_.incarnation();
  const auto check = [this] {
    return stopping_ ? absl::CancelledError("parameter server is shutting down") : absl::OkStatus();
  };
  wire::StepHeaderBytes head_bytes;
  // Between steps the worker computes: wait as long as it takes (keepalive
  // and the shard's peer timeout watch for a worker that is gone).
  if (!conn.RecvAll(head_bytes.data(), head_bytes.size(), check).ok()) return false;
  absl::StatusOr<wire::StepHeader> head = wire::DecodeStepHeader(head_bytes);
  if (!head.ok()) {
    SendError(conn, session_.Reject(metrics::RejectReason::kBadHeader, head.status()), false,
              incarnation);
    return false;
  }
  PushHead push_head;
  push_head.worker = head->worker;
  push_head.step = head->step;
  push_head.incarnation = head->incarnation;
  push_head.connection_worker = worker;
  push_head.extent = Range{head->offset, head->length};
  push_head.pipelined = head->pipelined;
  absl::StatusOr<StagedPush> push = session_.BeginPush(push_head);
  if (!push.ok()) {
    // Refused before any value was read or sent back: a plain answer, for
    // a pipelined step too (the worker reads it in place of a frame).
    SendError(conn, push.status(), false, incarnation);
    return false;
  }
  if (head->pipelined) return PipelinedStep(conn, worker, *head, *push, scratch);
  // Receive the gradient piece by piece where the session places it,
  // checksumming and counting NaN/Inf while each piece is in cache (fp16:
  // received into scratch.half and widened into the slot). A duplicate (a
  // retry of a push already committed) is read into scratch and dropped.
  const size_t total = static_cast<size_t>(head->length);
  const size_t bytes_per_value = wire::BytesPerValue(head->dtype);
  const size_t piece = wire::kPieceBytes / bytes_per_value;
  if (head->dtype == wire::DType::kF16) scratch.half.resize(std::min(total, piece));
  if (push->duplicate()) scratch.floats.resize(std::min(total, piece));
  uint32_t crc = 0;
  absl::Status received;
  for (size_t off = 0; off < total && received.ok(); off += piece) {
    const size_t n = std::min(piece, total - off);
    absl::StatusOr<std::span<float>> to =
        push->Place(head->offset + static_cast<int64_t>(off), static_cast<int64_t>(n));
    if (!to.ok()) {
      received = to.status();
      break;
    }
    int64_t nonfinite = 0;
    received = ReceiveValues(conn, to->empty() ? scratch.floats.data() : to->data(), n, head->dtype,
                             push->duplicate(), scratch, check, &crc, &nonfinite);
    if (received.ok()) {
      received = push->Arrived(nonfinite, static_cast<int64_t>(n * bytes_per_value));
    }
  }
  wire::TrailerBytes trailer;
  if (received.ok()) received = conn.RecvAll(trailer.data(), trailer.size(), check);
  if (!received.ok()) {
    // The worker went away mid-push: nothing is committed.
    return false;
  }
  absl::StatusOr<uint32_t> want = wire::DecodeTrailer(trailer);
  absl::Status payload = want.ok() ? push->CheckCrc(crc, *want)
                                   : push->Fail(want.status(), metrics::RejectReason::kBadChunk);
  absl::StatusOr<PushAnswer> committed =
      payload.ok() ? push->Commit() : absl::StatusOr<PushAnswer>(payload);
  if (!committed.ok()) {
    SendError(conn, committed.status(), false, incarnation);
    return false;
  }
  // The pull: wait as the mode says, then send the parameters pinned.
  PullAsk ask;
  ask.worker = worker;
  ask.incarnation = head->incarnation;
  ask.min_step = head->min_step;
  ask.clock = head->clock;
  absl::StatusOr<PinnedParams> pinned =
      session_.ReadPinned(ask, [&] { return stopping_.load() || conn.PeerHungUp(); });
  if (!pinned.ok()) {
    SendError(conn, pinned.status(), true, incarnation);
    return false;
  }
  wire::Answer a;
  a.pushed = true;
  a.finished = pinned->result.finished;
  a.has_params = true;
  a.global_step = pinned->result.global_step;
  a.incarnation = incarnation;
  a.offset = head->offset;
  a.length = head->length;
  if (!SendParams(conn, wire::EncodeAnswer(a), *pinned, head->dtype, check).ok()) return false;
  session_.CountSent(worker, static_cast<int64_t>(pinned->values.size() * bytes_per_value));
  return true;
}

absl::Status TcpShardServer::SendParams(TcpConnection& conn, const wire::AnswerBytes& answer,
                                        const PinnedParams& p, wire::DType dtype,
                                        const exchange::IoCheck& check) {
  const uint64_t version = p.result.version;
  if (dtype == wire::DType::kF16) {
    // Narrowed once per version, with its checksum, for every fp16 sender.
    std::shared_ptr<const HalfParams> h;
    {
      absl::MutexLock lock(&crc_mu_);
      if (half_ == nullptr || half_->version != version) {
        // Narrowed into a buffer no sender holds: a fresh one per version
        // cost a page fault per 4 KiB for large shards, and in async mode a
        // sender usually still holds the previous version.
        std::shared_ptr<HalfParams> spare =
            half_pool_.Writable(half_, [] { return std::make_shared<HalfParams>(); });
        spare->version = version;
        spare->values.resize(p.values.size());
        base::FloatsToHalves(p.values.data(), p.values.size(), spare->values.data());
        spare->crc = base::Crc32c(spare->values.data(), spare->values.size() * sizeof(uint16_t));
        half_ = std::move(spare);
      }
      h = half_;
    }
    const wire::TrailerBytes trailer = wire::EncodeTrailer(h->crc);
    if (absl::Status s = conn.SendAll(answer.data(), answer.size(), h->values.data(),
                                      h->values.size() * sizeof(uint16_t), check);
        !s.ok()) {
      return s;
    }
    return conn.SendAll(trailer.data(), trailer.size(), check);
  }
  std::optional<uint32_t> known;
  {
    absl::MutexLock lock(&crc_mu_);
    if (crc_version_ == version) known = crc_;
  }
  const char* data = reinterpret_cast<const char*>(p.values.data());
  const size_t total = p.values.size() * sizeof(float);
  uint32_t crc = 0;
  // The answer rides with the first piece.
  for (size_t off = 0; off < total || off == 0; off += wire::kPieceBytes) {
    const size_t n = std::min(wire::kPieceBytes, total - off);
    if (!known) crc = base::Crc32cExtend(crc, data + off, n);
    absl::Status s = off == 0 ? conn.SendAll(answer.data(), answer.size(), data, n, check)
                              : conn.SendAll(data + off, n, check);
    if (!s.ok()) return s;
    if (total == 0) break;
  }
  if (known) {
    crc = *known;
  } else {
    absl::MutexLock lock(&crc_mu_);
    crc_version_ = version;
    crc_ = crc;
  }
  const wire::TrailerBytes trailer = wire::EncodeTrailer(crc);
  return conn.SendAll(trailer.data(), trailer.size(), check);
}

bool TcpShardServer::PipelinedStep(TcpConnection& conn, int worker, const wire::StepHeader& head,
                                   StagedPush& push, Scratch& scratch) {
  wire::Answer answer;
  answer.incarnation = session_.incarnation();
  // The pull side: from now on only the sender writes to the connection,
  // until it is joined.
  std::atomic<bool> stop{false};
  // The stream ended with the shard's word (it aborted: a lost peer, say),
  // not a broken connection: the receive stops and the worker is told it.
  std::atomic<bool> shard_ended{false};
  absl::Status streamed;
  bool broken = false;  // a send failed: nothing more can reach the worker
  RoundRead last;
  std::thread sender([&] {
    streamed = StreamRound(conn, worker, head, stop, &last, &broken);
    if (broken) {
      conn.Shutdown();  // a failed send ends the push's receive too
    } else if (!streamed.ok() && !stop) {
      shard_ended = true;
    }
  });
  const auto receive_check = [&] {
    if (stopping_) return absl::CancelledError("parameter server is shutting down");
    return shard_ended ? absl::AbortedError("the step ended") : absl::OkStatus();
  };
  // The push: chunk by chunk, each checked (checksum, NaN/Inf) before the
  // session hands it to the shard. A duplicate's or a stale push's values
  // are read into scratch and dropped.
  const size_t total = static_cast<size_t>(head.length);
  const size_t bpv = wire::BytesPerValue(head.dtype);
  const size_t chunk = static_cast<size_t>(wire::ChunkValues(head.length));
  if (head.dtype == wire::DType::kF16) scratch.half.resize(std::min(total, chunk));
  scratch.floats.resize(std::min(total, chunk));
  absl::Status failure;
  bool connection_broke = false;  // no answer can reach the worker
  for (size_t off = 0; off < total; off += chunk) {
    const size_t n = std::min(chunk, total - off);
    absl::StatusOr<std::span<float>> to =
        push.Place(head.offset + static_cast<int64_t>(off), static_cast<int64_t>(n));
    if (!to.ok()) {
      failure = to.status();
      break;
    }
    uint32_t crc = 0;
    int64_t nonfinite = 0;
    wire::TrailerBytes trailer;
    failure = ReceiveValues(conn, to->empty() ? scratch.floats.data() : to->data(), n, head.dtype,
                            push.duplicate(), scratch, receive_check, &crc, &nonfinite);
    if (failure.ok()) failure = conn.RecvAll(trailer.data(), trailer.size(), receive_check);
    if (!failure.ok()) {
      // Our own check (the server stopping, the stream ended) leaves the
      // connection fit to carry the answer; anything else broke it.
      connection_broke = !absl::IsCancelled(failure) && !absl::IsAborted(failure);
      failure = push.Fail(
          absl::Status(connection_broke ? absl::StatusCode::kUnavailable : failure.code(),
                       absl::StrCat("push of worker ", worker, " step ", head.step,
                                    " broke off at chunk ", off / chunk, ": ", failure.message())),
          std::nullopt);
      break;
    }
    absl::StatusOr<uint32_t> want = wire::DecodeTrailer(trailer);
    failure = want.ok() ? push.CheckCrc(crc, *want)
                        : push.Fail(want.status(), metrics::RejectReason::kBadChunk);
    if (failure.ok()) failure = push.Arrived(nonfinite, static_cast<int64_t>(n * bpv));
    if (!failure.ok()) break;
  }
  if (failure.ok()) failure = push.Commit().status();
  if (!failure.ok()) stop = true;
  sender.join();
  push.Release();
  // What the worker is told, the most telling first: the shard's own error
  // (Abort's reason: a lost peer, as the plain path answers), then why the
  // push failed. Nothing when the connection itself broke.
  absl::Status tell = failure;
  if (!streamed.ok() && !broken && (failure.ok() || !absl::IsCancelled(streamed))) {
    tell = streamed;
  }
  if (!tell.ok() || !streamed.ok()) {
    if (!tell.ok() && !connection_broke && !broken) {
      answer.pushed = false;
      SendAnswer(conn, answer, tell, /*end_frame=*/true).IgnoreError();
    }
    return false;
  }
  answer.pushed = true;
  answer.finished = last.finished;
  answer.global_step = last.global_step;
  answer.offset = head.offset;
  answer.length = head.length;
  if (!SendAnswer(conn, answer, absl::OkStatus(), /*end_frame=*/true).ok()) return false;
  ++pipelined_steps_;
  session_.CountSent(worker, static_cast<int64_t>(total * bpv));
  return true;
}

absl::Status TcpShardServer::StreamRound(TcpConnection& conn, int worker,
                                         const wire::StepHeader& head,
                                         const std::atomic<bool>& stop, RoundRead* last,
                                         bool* broken) {
  // A frame once begun is sent whole (the worker reads all the while), so
  // the end frame never lands inside one: a failed push or a stopping
  // server ends the stream between frames (WaitRound's cancellation), and
  // Stop() shuts a connection whose worker stopped reading.
  const exchange::IoCheck check;
  const bool half = head.dtype == wire::DType::kF16;
  const size_t bpv = wire::BytesPerValue(head.dtype);
  const int64_t chunks = wire::NumChunks(head.length);
  const size_t chunk = static_cast<size_t>(wire::ChunkValues(head.length));
  std::vector<uint16_t> halves;
  uint64_t attempt = 0;
  int64_t sent = 0;
  while (true) {
    absl::StatusOr<RoundRead> r = session_.WaitRound(
        worker, head.step, attempt, sent, [&] { return stopping_ || stop || conn.PeerHungUp(); });
    if (!r.ok()) return r.status();
    if (r->kind == RoundRead::Kind::kRestart) {
      wire::Frame f;
      f.kind = wire::Frame::Kind::kRestart;
      const wire::FrameBytes b = wire::EncodeFrame(f);
      if (absl::Status s = conn.SendAll(b.data(), b.size(), check); !s.ok()) {
        *broken = true;
        return s;
      }
      attempt = 0;
      sent = 0;
      continue;
    }
    attempt = r->attempt;
    for (; sent < r->ready; ++sent) {
      const size_t off = static_cast<size_t>(sent) * chunk;
      const size_t n = std::min(chunk, static_cast<size_t>(head.length) - off);
      const void* bytes = r->values.data() + off;
      if (half) {
        halves.resize(n);
        base::FloatsToHalves(r->values.data() + off, n, halves.data());
        bytes = halves.data();
      }
      wire::Frame f;
      f.kind = wire::Frame::Kind::kChunk;
      f.index = static_cast<uint32_t>(sent);
      f.values = static_cast<uint32_t>(n);
      const wire::FrameBytes fb = wire::EncodeFrame(f);
      const wire::TrailerBytes tb = wire::EncodeTrailer(base::Crc32c(bytes, n * bpv));
      absl::Status s = conn.SendAll(fb.data(), fb.size(), bytes, n * bpv, check);
      if (s.ok()) s = conn.SendAll(tb.data(), tb.size(), check);
      if (!s.ok()) {
        *broken = true;
        return s;
      }
    }
    if (r->committed && sent == chunks) {
      *last = *std::move(r);
      last->pin.reset();
      return absl::OkStatus();
    }
  }
}

}  // namespace kubetrain::ps
