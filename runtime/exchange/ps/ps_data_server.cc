#include "runtime/exchange/ps/ps_data_server.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/crc32c.h"
#include "base/half_float.h"
#include "runtime/exchange/job_token.h"
#include "runtime/exchange/ps/data_plane_wire.h"
#include "runtime/exchange/ps/ps_refusal.h"
#include "runtime/exchange/ps/wire_codec.h"
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

absl::StatusOr<std::unique_ptr<PsDataServer>> PsDataServer::Start(
    PsShard& shard, const std::string& host, std::string token, metrics::RuntimeMetrics* metrics) {
  absl::StatusOr<exchange::TcpListener> listener = exchange::TcpListener::Listen(host, 0);
  if (!listener.ok()) {
    return absl::Status(listener.status().code(),
                        absl::StrCat("PS data plane: ", listener.status().message()));
  }
  std::unique_ptr<PsDataServer> s(
      new PsDataServer(shard, std::move(*listener), std::move(token), metrics));
  s->accept_thread_ = std::thread([p = s.get()] { p->AcceptLoop(); });
  return s;
}

PsDataServer::PsDataServer(PsShard& shard, exchange::TcpListener listener, std::string token,
                           metrics::RuntimeMetrics* metrics)
    : shard_(shard),
      listener_(std::move(listener)),
      port_(listener_.port()),
      token_(std::move(token)),
      metrics_(metrics) {}

PsDataServer::~PsDataServer() { Stop(); }

int PsDataServer::MaxConnections() const { return 4 * shard_.options().num_workers + 16; }

int PsDataServer::connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const auto& c : connections_) n += c->done ? 0 : 1;
  return n;
}

void PsDataServer::Stop() {
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
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& c : connections_) c->conn.Shutdown();  // wakes a blocked receive or send
    all.swap(connections_);
  }
  // A thread waiting in PsShard::Read sees stopping_ within 100 ms.
  for (auto& c : all) {
    if (c->thread.joinable()) c->thread.join();
  }
}

void PsDataServer::ReapFinished() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if ((*it)->done) {
      if ((*it)->thread.joinable()) (*it)->thread.join();
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

void PsDataServer::AcceptLoop() {
  const auto check = [this] {
    return stopping_ ? absl::CancelledError("stopping") : absl::OkStatus();
  };
  while (!stopping_) {
    absl::StatusOr<TcpConnection> conn = listener_.Accept(1.0, check);
    if (!conn.ok()) continue;  // the timeout, a stop, or a connection reset before accept
    std::lock_guard<std::mutex> lock(mu_);
    ReapFinished();
    if (stopping_) break;
    if (static_cast<int>(connections_.size()) >= MaxConnections()) {
      const absl::Status full = absl::ResourceExhaustedError(
          absl::StrCat("parameter server data plane: ", connections_.size(),
                       " connections already open (at most ", MaxConnections(), ")"));
      shard_.CountRejected(metrics::RejectReason::kBadHeader, std::string(full.message()));
      SendError(*conn, full, false, shard_.options().incarnation);
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

void PsDataServer::Serve(Connection& c) {
  TcpConnection& conn = c.conn;
  const uint64_t incarnation = shard_.options().incarnation;
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
    shard_.CountRejected(metrics::RejectReason::kBadHeader,
                         absl::StrCat("data-plane connection: ", hello.status().message()));
    SendError(conn, hello.status(), false, incarnation);
    return;
  }
  std::string token(hello->token_bytes, '\0');
  if (!conn.RecvAll(token.data(), token.size(), hello_check).ok()) return;
  if (!exchange::JobTokenAccepted(token_, token)) {
    const absl::Status denied = exchange::WrongJobTokenError();
    shard_.CountRejected(
        metrics::RejectReason::kBadToken,
        absl::StrCat("data-plane connection of worker ", hello->worker, ": ", denied.message()));
    SendError(conn, denied, false, incarnation);
    return;
  }
  if (hello->incarnation != incarnation) {
    SendError(conn, StaleIncarnationError(incarnation, hello->incarnation), false, incarnation);
    return;
  }
  if (hello->worker < 0 || hello->worker >= shard_.options().num_workers) {
    SendError(conn, absl::InvalidArgumentError(absl::StrCat("unknown worker id ", hello->worker)),
              false, incarnation);
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

bool PsDataServer::Step(TcpConnection& conn, int worker, Scratch& scratch) {
  const uint64_t incarnation = shard_.options().incarnation;
  const auto check = [this] {
    return stopping_ ? absl::CancelledError("parameter server is shutting down") : absl::OkStatus();
  };
  wire::StepHeaderBytes head_bytes;
  // Between steps the worker computes: wait as long as it takes (keepalive
  // and the shard's peer timeout watch for a worker that is gone).
  if (!conn.RecvAll(head_bytes.data(), head_bytes.size(), check).ok()) return false;
  absl::StatusOr<wire::StepHeader> head = wire::DecodeStepHeader(head_bytes);
  if (!head.ok()) {
    shard_.CountRejected(metrics::RejectReason::kBadHeader, std::string(head.status().message()));
    SendError(conn, head.status(), false, incarnation);
    return false;
  }
  if (head->worker != worker) {
    const absl::Status bad = absl::InvalidArgumentError(
        absl::StrCat("a step of worker ", head->worker, " on the connection of worker ", worker));
    shard_.CountRejected(metrics::RejectReason::kBadHeader, std::string(bad.message()));
    SendError(conn, bad, false, incarnation);
    return false;
  }
  if (head->incarnation != incarnation) {
    SendError(conn, StaleIncarnationError(incarnation, head->incarnation), false, incarnation);
    return false;
  }
  const Range range = shard_.range();
  if (head->offset != range.offset || head->length != range.length) {
    // The payload's size is not this shard's: refuse before reading it.
    const absl::Status bad = absl::InvalidArgumentError(absl::StrCat(
        "push of [", head->offset, ", ", head->offset + head->length, ") does not fit: shard ",
        shard_.options().shard_index, " owns [", range.offset, ", ", range.end(), ")"));
    shard_.CountRejected(metrics::RejectReason::kBadRange, std::string(bad.message()));
    SendError(conn, bad, false, incarnation);
    return false;
  }
  if (head->pipelined) {
    if (!shard_.pipelined()) {
      SendError(conn,
                absl::FailedPreconditionError(
                    "this parameter server does not take pipelined steps (no --ps-pipeline)"),
                false, incarnation);
      return false;
    }
    return PipelinedStep(conn, worker, *head, scratch);
  }
  absl::StatusOr<std::span<float>> staging = shard_.BeginStaging(worker, head->step, false);
  const bool duplicate = absl::IsAlreadyExists(staging.status());
  if (!staging.ok() && !duplicate) {
    if (absl::IsInvalidArgument(staging.status())) {
      shard_.CountRejected(metrics::RejectReason::kUnknownWorker,
                           std::string(staging.status().message()));
    }
    SendError(conn, staging.status(), false, incarnation);
    return false;
  }
  // Receive the gradient piece by piece, checksumming and counting NaN/Inf
  // while each piece is in cache (fp16: received into scratch.half and
  // widened into the slot). A duplicate (a retry of a push already
  // committed) is read into scratch and dropped.
  const size_t total = static_cast<size_t>(range.length);
  const bool half = head->dtype == wire::DType::kF16;
  const size_t bytes_per_value = wire::BytesPerValue(head->dtype);
  const size_t piece = wire::kPieceBytes / bytes_per_value;
  if (half) {
    scratch.half.resize(std::min(total, piece));
  } else if (duplicate) {
    scratch.floats.resize(std::min(total, piece));
  }
  uint32_t crc = 0;
  int64_t nonfinite = 0;
  absl::Status received;
  for (size_t off = 0; off < total && received.ok(); off += piece) {
    const size_t n = std::min(piece, total - off);
    float* dst = duplicate ? scratch.floats.data() : staging->data() + off;
    void* wire_dst = half ? static_cast<void*>(scratch.half.data()) : static_cast<void*>(dst);
    received = conn.RecvAll(wire_dst, n * bytes_per_value, check);
    if (!received.ok()) break;
    crc = base::Crc32cExtend(crc, wire_dst, n * bytes_per_value);
    if (duplicate) continue;
    if (half) {
      base::HalvesToFloats(scratch.half.data(), n, dst);
    }
    nonfinite += CountNonFinite(dst, n);
  }
  wire::TrailerBytes trailer;
  if (received.ok()) received = conn.RecvAll(trailer.data(), trailer.size(), check);
  if (!received.ok()) {
    // The worker went away mid-push: nothing was committed.
    if (!duplicate) shard_.EndStaging(worker);
    return false;
  }
  absl::StatusOr<uint32_t> want = wire::DecodeTrailer(trailer);
  absl::Status payload = want.status();
  if (payload.ok() && *want != crc) {
    payload = absl::DataLossError(absl::StrCat("push of worker ", worker, " step ", head->step,
                                               " failed its checksum (CRC-32C ", absl::Hex(crc),
                                               ", sent ", absl::Hex(*want), "): nothing applied"));
  }
  if (!payload.ok()) {
    if (!duplicate) {
      shard_.EndStaging(worker);
      shard_.CountRejected(metrics::RejectReason::kBadChunk, std::string(payload.message()));
    }
    SendError(conn, payload, false, incarnation);
    return false;
  }
  if (!duplicate) {
    absl::StatusOr<PushResult> r = shard_.CommitPush(worker, head->step, nonfinite);
    shard_.EndStaging(worker);
    if (!r.ok()) {
      SendError(conn, r.status(), false, incarnation);
      return false;
    }
    if (metrics_ != nullptr) {
      metrics_->AddReceivedBytes(metrics::PeerRole::kWorker,
                                 static_cast<int64_t>(total * bytes_per_value));
    }
  }
  // The pull: wait as the mode says, then send the parameters pinned.
  Pinned snap;
  absl::StatusOr<PullResult> pulled = shard_.Read(
      worker, head->min_step, head->clock,
      [&](std::span<const float> params, const PullResult& r) {
        snap.result = r;
        snap.values = params;
      },
      [&] { return stopping_.load() || conn.PeerHungUp(); });
  if (!pulled.ok()) {
    SendError(conn, pulled.status(), true, incarnation);
    return false;
  }
  wire::Answer a;
  a.pushed = true;
  a.finished = snap.result.finished;
  a.has_params = true;
  a.global_step = snap.result.global_step;
  a.incarnation = incarnation;
  a.offset = range.offset;
  a.length = range.length;
  if (!SendParams(conn, wire::EncodeAnswer(a), snap, head->dtype, check).ok()) return false;
  if (metrics_ != nullptr) {
    metrics_->AddSentBytes(metrics::PeerRole::kWorker,
                           static_cast<int64_t>(snap.values.size() * bytes_per_value));
  }
  return true;
}

absl::Status PsDataServer::SendParams(TcpConnection& conn, const wire::AnswerBytes& answer,
                                      const Pinned& p, wire::DType dtype,
                                      const exchange::IoCheck& check) {
  const uint64_t version = p.result.version;
  if (dtype == wire::DType::kF16) {
    // Narrowed once per version, with its checksum, for every fp16 sender.
    std::shared_ptr<const HalfParams> h;
    {
      std::lock_guard<std::mutex> lock(crc_mu_);
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
    std::lock_guard<std::mutex> lock(crc_mu_);
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
    std::lock_guard<std::mutex> lock(crc_mu_);
    crc_version_ = version;
    crc_ = crc;
  }
  const wire::TrailerBytes trailer = wire::EncodeTrailer(crc);
  return conn.SendAll(trailer.data(), trailer.size(), check);
}

bool PsDataServer::PipelinedStep(TcpConnection& conn, int worker, const wire::StepHeader& head,
                                 Scratch& scratch) {
  wire::Answer answer;
  answer.incarnation = shard_.options().incarnation;
  absl::StatusOr<std::span<float>> staging = shard_.BeginStaging(worker, head.step, false);
  const bool duplicate = absl::IsAlreadyExists(staging.status());
  if (!staging.ok() && !duplicate) {
    if (absl::IsInvalidArgument(staging.status())) {
      shard_.CountRejected(metrics::RejectReason::kUnknownWorker,
                           std::string(staging.status().message()));
    }
    SendAnswer(conn, answer, staging.status(), /*end_frame=*/true).IgnoreError();
    return false;
  }
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
  // shard counts it. A duplicate's or a stale push's values are dropped.
  const size_t total = static_cast<size_t>(head.length);
  const bool half = head.dtype == wire::DType::kF16;
  const size_t bpv = wire::BytesPerValue(head.dtype);
  const size_t chunk = static_cast<size_t>(wire::ChunkValues(head.length));
  if (half) scratch.half.resize(std::min(total, chunk));
  scratch.floats.resize(std::min(total, chunk));
  bool taking = !duplicate;
  bool pushed = duplicate;
  absl::Status failure;
  bool connection_broke = false;  // no answer can reach the worker
  int64_t index = 0;
  for (size_t off = 0; off < total; off += chunk, ++index) {
    const size_t n = std::min(chunk, total - off);
    float* dst = taking ? staging->data() + off : scratch.floats.data();
    void* wire_dst = half ? static_cast<void*>(scratch.half.data()) : static_cast<void*>(dst);
    wire::TrailerBytes trailer;
    failure = conn.RecvAll(wire_dst, n * bpv, receive_check);
    if (failure.ok()) failure = conn.RecvAll(trailer.data(), trailer.size(), receive_check);
    if (!failure.ok()) {
      // Our own check (the server stopping, the stream ended) leaves the
      // connection fit to carry the answer; anything else broke it.
      connection_broke = !absl::IsCancelled(failure) && !absl::IsAborted(failure);
      failure = absl::Status(connection_broke ? absl::StatusCode::kUnavailable : failure.code(),
                             absl::StrCat("push of worker ", worker, " step ", head.step,
                                          " broke off at chunk ", index, ": ", failure.message()));
      break;
    }
    const uint32_t crc = base::Crc32c(wire_dst, n * bpv);
    absl::StatusOr<uint32_t> want = wire::DecodeTrailer(trailer);
    if (!want.ok() || *want != crc) {
      failure = want.ok() ? absl::DataLossError(absl::StrCat(
                                "push of worker ", worker, " step ", head.step, " chunk ", index,
                                " failed its checksum (CRC-32C ", absl::Hex(crc), ", sent ",
                                absl::Hex(*want), "): nothing applied"))
                          : want.status();
      shard_.CountRejected(metrics::RejectReason::kBadChunk, std::string(failure.message()));
      break;
    }
    if (duplicate) continue;  // committed before: as on the plain path, not looked at
    if (half) base::HalvesToFloats(scratch.half.data(), n, dst);
    const int64_t nonfinite = CountNonFinite(dst, n);
    if (!taking) {
      // A stale push is dropped, but one with NaN/Inf is refused, as the
      // plain path refuses it before judging its step.
      if (nonfinite > 0) {
        failure = absl::InvalidArgumentError(
            absl::StrCat("gradient from worker ", worker, " for step ", head.step, " has ",
                         nonfinite, " NaN/Inf values in chunk ", index, "; rejected"));
        shard_.CountRejected(metrics::RejectReason::kNonFinite, std::string(failure.message()));
        break;
      }
      continue;
    }
    absl::StatusOr<bool> took = shard_.PushChunk(worker, head.step, index, nonfinite);
    if (!took.ok()) {
      failure = took.status();
      break;
    }
    if (!*took) taking = false;  // stale: its step is over
    pushed = true;
  }
  if (!failure.ok()) {
    if (!duplicate) shard_.AbortPush(worker);
    stop = true;
    pushed = false;
  } else if (!duplicate && metrics_ != nullptr) {
    metrics_->AddReceivedBytes(metrics::PeerRole::kWorker, static_cast<int64_t>(total * bpv));
  }
  sender.join();
  if (!duplicate) shard_.EndStaging(worker);
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
  answer.pushed = pushed;
  answer.finished = last.finished;
  answer.global_step = last.global_step;
  answer.offset = head.offset;
  answer.length = head.length;
  if (!SendAnswer(conn, answer, absl::OkStatus(), /*end_frame=*/true).ok()) return false;
  ++pipelined_steps_;
  if (metrics_ != nullptr) {
    metrics_->AddSentBytes(metrics::PeerRole::kWorker, static_cast<int64_t>(total * bpv));
  }
  return true;
}

absl::Status PsDataServer::StreamRound(TcpConnection& conn, int worker,
                                       const wire::StepHeader& head, const std::atomic<bool>& stop,
                                       RoundRead* last, bool* broken) {
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
    absl::StatusOr<RoundRead> r = shard_.WaitRound(
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
