#include "runtime/exchange/ps/shard_session.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/exchange/job_token.h"
#include "runtime/exchange/ps/ps_refusal.h"

namespace kubetrain::ps {

using metrics::RejectReason;

ShardSession::ShardSession(PsShard& shard, std::string token, metrics::RuntimeMetrics* metrics)
    : shard_(shard), token_(std::move(token)), metrics_(metrics) {}

absl::Status ShardSession::AdmitWriter(absl::string_view presented, absl::string_view who) const {
  if (exchange::JobTokenAccepted(token_, presented)) return absl::OkStatus();
  return Reject(RejectReason::kBadToken, exchange::WrongJobTokenError(), who);
}

absl::Status ShardSession::AdmitReader(absl::string_view presented) const {
  return exchange::JobTokenAccepted(token_, presented) ? absl::OkStatus()
                                                       : exchange::WrongJobTokenError();
}

absl::Status ShardSession::AdmitConnection(int worker, uint64_t incarnation,
                                           absl::string_view token) const {
  if (absl::Status s = AdmitWriter(token, absl::StrCat("data-plane connection of worker ", worker));
      !s.ok()) {
    return s;
  }
  if (incarnation != this->incarnation()) {
    return StaleIncarnationError(this->incarnation(), incarnation);
  }
  if (!shard_.KnownWorker(worker)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown worker id ", worker));
  }
  return absl::OkStatus();
}

absl::Status ShardSession::Reject(RejectReason reason, absl::Status why,
                                  absl::string_view context) const {
  shard_.CountRejected(reason, context.empty() ? std::string(why.message())
                                               : absl::StrCat(context, ": ", why.message()));
  return why;
}

absl::StatusOr<StagedPush> ShardSession::BeginPush(const PushHead& head) const {
  if (head.connection_worker.has_value() && head.worker != *head.connection_worker) {
    return Reject(RejectReason::kBadHeader,
                  absl::InvalidArgumentError(absl::StrCat("a step of worker ", head.worker,
                                                          " on the connection of worker ",
                                                          *head.connection_worker)));
  }
  if (head.incarnation != incarnation()) {
    return StaleIncarnationError(incarnation(), head.incarnation);
  }
  const Range range = shard_.range();
  if (head.extent.has_value() && *head.extent != range) {
    // The payload's size is not this shard's: refused before it is read.
    return Reject(
        RejectReason::kBadRange,
        absl::InvalidArgumentError(absl::StrCat(
            "push of [", head.extent->offset, ", ", head.extent->end(), ") does not fit: shard ",
            shard_.options().shard_index, " owns [", range.offset, ", ", range.end(), ")")));
  }
  if (head.pipelined && !shard_.pipelined()) {
    return absl::FailedPreconditionError(
        "this parameter server does not take pipelined steps (no --ps-pipeline)");
  }
  absl::StatusOr<std::span<float>> slot =
      shard_.BeginStaging(head.worker, head.step, head.initialize);
  const bool duplicate = absl::IsAlreadyExists(slot.status());
  if (!slot.ok() && !duplicate) {
    if (absl::IsInvalidArgument(slot.status())) {
      shard_.CountRejected(RejectReason::kUnknownWorker, std::string(slot.status().message()));
    }
    return slot.status();
  }
  return StagedPush(*this, head, range, duplicate ? std::span<float>() : *slot, duplicate);
}

absl::StatusOr<PullResult> ShardSession::Read(const PullAsk& ask, const PsShard::ParamsReader& read,
                                              const std::function<bool()>& cancelled) const {
  if (ask.incarnation != 0 && ask.incarnation != incarnation()) {
    return StaleIncarnationError(incarnation(), ask.incarnation);
  }
  if (ask.worker != kObserver && !shard_.KnownWorker(ask.worker)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown worker id ", ask.worker));
  }
  if (shard_.range().length == 0) {
    return absl::FailedPreconditionError("the shard has no layout yet: register first");
  }
  return shard_.Read(ask.worker, ask.min_step, ask.clock, read, cancelled);
}

absl::StatusOr<PinnedParams> ShardSession::ReadPinned(
    const PullAsk& ask, const std::function<bool()>& cancelled) const {
  PinnedParams p;
  absl::StatusOr<PullResult> r = Read(
      ask,
      [&p](std::span<const float> params, const PullResult& pinned) {
        p.result = pinned;
        p.values = params;
      },
      cancelled);
  if (!r.ok()) return r.status();
  return p;
}

absl::StatusOr<RoundRead> ShardSession::WaitRound(int worker, int64_t step, uint64_t attempt,
                                                  int64_t sent,
                                                  const std::function<bool()>& cancelled) const {
  return shard_.WaitRound(worker, step, attempt, sent, cancelled);
}

void ShardSession::CountSent(int worker, int64_t wire_bytes) const {
  if (metrics_ == nullptr) return;
  metrics_->AddSentBytes(
      worker == kObserver ? metrics::PeerRole::kEvaluator : metrics::PeerRole::kWorker, wire_bytes);
}

void ShardSession::CountReceived(int64_t wire_bytes) const {
  if (metrics_ != nullptr) metrics_->AddReceivedBytes(metrics::PeerRole::kWorker, wire_bytes);
}

StagedPush::StagedPush(const ShardSession& session, const PushHead& head, Range range,
                       std::span<float> slot, bool duplicate)
    : session_(&session),
      head_(head),
      range_(range),
      slot_(slot),
      duplicate_(duplicate),
      staged_(!duplicate) {}

StagedPush::StagedPush(StagedPush&& other) noexcept
    : session_(other.session_),
      head_(std::move(other.head_)),
      range_(other.range_),
      slot_(other.slot_),
      duplicate_(other.duplicate_),
      staged_(std::exchange(other.staged_, false)),
      committed_(other.committed_),
      taking_(other.taking_),
      failure_(std::move(other.failure_)),
      covered_(other.covered_),
      chunk_(other.chunk_),
      nonfinite_(other.nonfinite_),
      wire_bytes_(other.wire_bytes_),
      pull_worker_(other.pull_worker_) {}

StagedPush::~StagedPush() { Release(); }

void StagedPush::Release() {
  if (!staged_) return;
  staged_ = false;
  PsShard& shard = session_->shard();
  if (head_.pipelined && !committed_) shard.AbortPush(head_.worker);
  shard.EndStaging(head_.worker);
}

absl::Status StagedPush::Failed(absl::Status why, std::optional<RejectReason> reason) {
  if (!failure_.ok()) return failure_;
  failure_ = why.ok() ? absl::InternalError("push failed without a reason") : std::move(why);
  if (reason.has_value() && !duplicate_) {
    session_->shard().CountRejected(*reason, std::string(failure_.message()));
  }
  if (head_.pipelined) {
    // Its chunks stop counting now, so the round rolls back before the
    // transport's sender is told to stop; the slot is released once the
    // sender is joined (Release).
    if (staged_) session_->shard().AbortPush(head_.worker);
  } else {
    // Free before the worker hears why: its retry may come at once.
    Release();
  }
  return failure_;
}

absl::Status StagedPush::Fail(absl::Status why, std::optional<RejectReason> reason) {
  return Failed(std::move(why), reason);
}

absl::StatusOr<std::span<float>> StagedPush::Place(int64_t offset, int64_t length) {
  if (!failure_.ok()) return failure_;
  if (offset != range_.offset + covered_ || length <= 0 || covered_ + length > range_.length) {
    return Failed(absl::InvalidArgumentError(absl::StrCat(
                      "chunk [", offset, ", ", offset + length, ") does not fit: shard ",
                      session_->shard().options().shard_index, " owns [", range_.offset, ", ",
                      range_.end(), ") and expected offset ", range_.offset + covered_)),
                  RejectReason::kBadRange);
  }
  std::span<float> to;
  if (!duplicate_ && taking_) {
    to = slot_.subspan(static_cast<size_t>(covered_), static_cast<size_t>(length));
  }
  covered_ += length;
  ++chunk_;
  return to;
}

absl::Status StagedPush::Arrived(int64_t nonfinite, int64_t wire_bytes) {
  if (!failure_.ok()) return failure_;
  if (duplicate_) return absl::OkStatus();  // committed before: not looked at
  wire_bytes_ += wire_bytes;
  if (!head_.pipelined) {
    nonfinite_ += nonfinite;  // judged at Commit (PsShard::CommitPush)
    return absl::OkStatus();
  }
  if (!taking_) {
    // A stale push is dropped, but one with NaN/Inf is refused, as a whole
    // push is refused before its step is judged.
    if (nonfinite > 0) {
      return Failed(absl::InvalidArgumentError(absl::StrCat(
                        "gradient from worker ", head_.worker, " for step ", head_.step, " has ",
                        nonfinite, " NaN/Inf values in chunk ", chunk_, "; rejected")),
                    RejectReason::kNonFinite);
    }
    return absl::OkStatus();
  }
  // The shard counts its own refusals (NaN/Inf, a step from the future).
  absl::StatusOr<bool> took =
      session_->shard().PushChunk(head_.worker, head_.step, chunk_, nonfinite);
  if (!took.ok()) return Failed(took.status(), std::nullopt);
  if (!*took) taking_ = false;  // stale: its step is over; the rest is dropped
  return absl::OkStatus();
}

absl::Status StagedPush::CheckCrc(uint32_t received, uint32_t sent) {
  if (!failure_.ok()) return failure_;
  if (received == sent) return absl::OkStatus();
  return Failed(absl::DataLossError(
                    absl::StrCat("push of worker ", head_.worker, " step ", head_.step,
                                 head_.pipelined ? absl::StrCat(" chunk ", chunk_) : std::string(),
                                 " failed its checksum (CRC-32C ", absl::Hex(received), ", sent ",
                                 absl::Hex(sent), "): nothing applied")),
                RejectReason::kBadChunk);
}

void StagedPush::PullArrived(int worker) { pull_worker_ = worker; }

PushAnswer StagedPush::Drop() {
  PushAnswer a;
  a.global_step = session_->shard().global_step();
  a.incarnation = session_->incarnation();
  return a;
}

absl::StatusOr<PushAnswer> StagedPush::Commit() {
  if (!failure_.ok()) return failure_;
  if (covered_ != range_.length) {
    return Failed(absl::InvalidArgumentError(absl::StrCat(
                      "push covers ", covered_, " of the ", range_.length, " elements shard ",
                      session_->shard().options().shard_index, " owns")),
                  RejectReason::kBadRange);
  }
  if (head_.ends_with_pull) {
    if (!pull_worker_.has_value()) {
      return Failed(absl::InvalidArgumentError("a PushPull step ended without its pull request"),
                    RejectReason::kBadHeader);
    }
    if (*pull_worker_ != head_.worker) {
      return Failed(
          absl::InvalidArgumentError(absl::StrCat("PushPull step of worker ", head_.worker,
                                                  " asks to pull for worker ", *pull_worker_)),
          RejectReason::kBadHeader);
    }
  }
  if (duplicate_) return Drop();
  PsShard& shard = session_->shard();
  PushAnswer a;
  a.incarnation = session_->incarnation();
  absl::Status commit;
  if (head_.pipelined) {
    // Every chunk is with the shard; its round commits there.
    a.accepted = taking_;
  } else if (head_.initialize) {
    absl::StatusOr<bool> took = shard.CommitInitialize(head_.worker, head_.step, head_.total_steps);
    commit = took.status();
    a.accepted = took.ok() && *took;
  } else {
    absl::StatusOr<PushResult> r = shard.CommitPush(head_.worker, head_.step, nonfinite_);
    commit = r.status();
    a.accepted = r.ok() && r->accepted;
  }
  committed_ = commit.ok();
  if (!head_.pipelined) Release();
  // The bytes came whatever the shard made of them; initial parameters are
  // no training traffic.
  if (!head_.initialize) session_->CountReceived(wire_bytes_);
  if (!commit.ok()) {
    failure_ = commit;
    return commit;
  }
  a.global_step = shard.global_step();
  return a;
}

}  // namespace kubetrain::ps
