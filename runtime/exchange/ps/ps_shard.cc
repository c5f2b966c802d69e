#include "runtime/exchange/ps/ps_shard.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/exchange/checkpoint.h"
#include "runtime/exchange/ps/data_plane_wire.h"
#include "runtime/exchange/ps/ps_refusal.h"
#include "runtime/tensor/denormals.h"

namespace kubetrain::ps {
namespace {

// out[0, n) = the mean of slots[k][begin, begin + n), summed in slot (worker)
// order so the result never depends on arrival order: a sync step's
// gradient, made a block at a time right before the optimizer reads it.
void AverageSlots(const std::vector<const float*>& slots, size_t begin, size_t n, float* out) {
  const float inv = 1.0f / static_cast<float>(slots.size());
  const float* s0 = slots[0] + begin;
  for (size_t i = 0; i < n; ++i) out[i] = s0[i];
  for (size_t k = 1; k < slots.size(); ++k) {
    const float* s = slots[k] + begin;
    for (size_t i = 0; i < n; ++i) out[i] += s[i];
  }
  for (size_t i = 0; i < n; ++i) out[i] *= inv;
}

}  // namespace

PsShard::PsShard(PsShardOptions options, const Clock& clock, Logger log,
                 metrics::RuntimeMetrics* metrics)
    : opt_(std::move(options)),
      rule_(MakeConsistencyRule(opt_.mode, opt_.num_workers, opt_.replicas_to_aggregate)),
      pipelined_(
          opt_.pipeline && opt_.mode.kind == ExchangeMode::kSync &&
          (opt_.replicas_to_aggregate <= 0 || opt_.replicas_to_aggregate >= opt_.num_workers)),
      clock_(clock),
      log_(std::move(log)),
      metrics_(metrics),
      start_seconds_(clock.NowSeconds()),
      workers_(static_cast<size_t>(std::max(opt_.num_workers, 1))) {
  for (size_t i = 0; i < workers_.size(); ++i) {
    workers_[i].name =
        i < opt_.worker_names.size() ? opt_.worker_names[i] : absl::StrCat("worker ", i);
  }
  last_checkpoint_time_ = start_seconds_;
}

absl::Status PsShard::EnsureLayoutLocked(int64_t num_params) {
  if (num_params <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_params must be > 0, got ", num_params));
  }
  if (num_params_ != 0) {
    if (num_params != num_params_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "worker's model has ", num_params, " parameters but this job's has ", num_params_));
    }
    return absl::OkStatus();
  }
  num_params_ = num_params;
  range_ = ShardRange(num_params, opt_.num_shards, opt_.shard_index);
  num_chunks_ = data_plane::NumChunks(range_.length);
  chunk_values_ = data_plane::ChunkValues(range_.length);
  const size_t n = static_cast<size_t>(range_.length);
  params_pool_ = ReusePool<AlignedBuffer>();
  params_ = params_pool_.Writable(nullptr, [n] { return std::make_shared<AlignedBuffer>(n); });
  for (Worker& w : workers_) w.slot = AlignedBuffer(n);
  absl::StatusOr<std::unique_ptr<optim::Optimizer>> opt = optim::MakeOptimizer(opt_.optimizer, n);
  if (!opt.ok()) return opt.status();
  optimizer_ = *std::move(opt);
  optimizer_state_.clear();
  for (auto& st : optimizer_->State()) optimizer_state_.push_back(st.second);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PsShard::RestoreFromCheckpoint() {
  if (opt_.checkpoint_dir.empty()) return -1;
  absl::StatusOr<exchange::CheckpointData> ckpt =
      exchange::LoadLatestCheckpoint(opt_.checkpoint_dir, opt_.shard_index, opt_.num_shards, log_);
  if (absl::IsNotFound(ckpt.status())) return -1;
  if (!ckpt.ok()) return ckpt.status();
  const v1::CheckpointHeader& h = ckpt->header;
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = EnsureLayoutLocked(static_cast<int64_t>(h.num_params())); !s.ok()) return s;
  if (static_cast<int64_t>(h.range().offset()) != range_.offset ||
      static_cast<int64_t>(h.range().length()) != range_.length) {
    return absl::FailedPreconditionError(absl::StrCat(ckpt->path, ": range does not match shard ",
                                                      opt_.shard_index, " of ", opt_.num_shards));
  }
  if (h.optimizer() != opt_.optimizer.kind) {
    return absl::FailedPreconditionError(absl::StrCat(ckpt->path, ": written by optimizer '",
                                                      h.optimizer(), "', this job uses '",
                                                      opt_.optimizer.kind, "'"));
  }
  auto state = optimizer_->State();
  if (state.size() != ckpt->states.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat(ckpt->path, ": optimizer state does not match this optimizer's"));
  }
  std::copy(ckpt->params.begin(), ckpt->params.end(), MutableParamsLocked().data());
  for (size_t i = 0; i < state.size(); ++i) {
    std::copy(ckpt->states[i].begin(), ckpt->states[i].end(), state[i].second.begin());
  }
  optimizer_->set_steps(h.optimizer_steps());
  global_step_ = h.global_step();
  total_steps_ = h.total_steps();
  for (int i = 0; i < h.worker_clocks_size() && i < static_cast<int>(workers_.size()); ++i) {
    workers_[i].clock = h.worker_clocks(i);
  }
  optim::LrScheduleOptions lr = opt_.lr;
  if (lr.total_steps == 0) lr.total_steps = std::max<int64_t>(total_steps_, 1);
  absl::StatusOr<optim::LrSchedule> schedule = optim::LrSchedule::Create(lr);
  if (!schedule.ok()) return schedule.status();
  schedule_ = *schedule;
  initialized_ = true;
  restored_step_ = global_step_;
  last_checkpoint_step_ = global_step_;
  ++version_;
  log_(absl::StrCat("restored ", ckpt->path, " at global step ", global_step_));
  return global_step_;
}

Range PsShard::range() const {
  std::lock_guard<std::mutex> lock(mu_);
  return range_;
}

absl::Status PsShard::CheckWorker(int worker) const {
  if (!aborted_.ok()) return aborted_;
  if (worker < 0 || worker >= static_cast<int>(workers_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("unknown worker id ", worker, " (this job has ",
                                                   workers_.size(), " training replicas)"));
  }
  return absl::OkStatus();
}

void PsShard::TouchLocked(int worker) { workers_[worker].last_seen = clock_.NowSeconds(); }

absl::StatusOr<RegisterInfo> PsShard::Register(int worker, int64_t num_params,
                                               const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = CheckWorker(worker); !s.ok()) return s;
  if (absl::Status s = EnsureLayoutLocked(num_params); !s.ok()) return s;
  Worker& w = workers_[worker];
  if (!name.empty()) w.name = name;
  if (w.registered) {
    log_(absl::StrCat(w.name, " re-registered at clock ", w.clock));
    if (metrics_ != nullptr) metrics_->AddPeerRestart(metrics::PeerRole::kWorker);
  }
  w.registered = true;
  TouchLocked(worker);
  RegisterInfo info;
  info.range = range_;
  info.initialized = initialized_;
  info.global_step = global_step_;
  info.worker_clock = rule_->ReportedClock(w.clock, global_step_);
  return info;
}

absl::StatusOr<std::span<float>> PsShard::BeginStaging(int worker, int64_t step, bool initialize) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = CheckWorker(worker); !s.ok()) return s;
  Worker& w = workers_[worker];
  if (!w.registered || num_params_ == 0) {
    return absl::FailedPreconditionError(absl::StrCat(w.name, " has not registered"));
  }
  if (w.staging) {
    return absl::UnavailableError(absl::StrCat(w.name, " already has a push in flight"));
  }
  if (!initialize && !initialized_) {
    return WithPsRefusal(
        absl::FailedPreconditionError("the shard has no parameters yet (not initialised)"),
        PsRefusal::kUninitialised);
  }
  if (!initialize && w.accepted) {
    // A restarted worker repeating the step it had already contributed.
    ++stale_;
    return absl::AlreadyExistsError(
        absl::StrCat(w.name, " already pushed a gradient for step ", global_step_));
  }
  w.staging = true;
  ++w.in_flight;
  TouchLocked(worker);
  return std::span<float>(w.slot.data(), w.slot.size());
}

void PsShard::EndStaging(int worker) {
  std::lock_guard<std::mutex> lock(mu_);
  if (worker < 0 || worker >= static_cast<int>(workers_.size())) return;
  Worker& w = workers_[worker];
  if (w.staging) {
    w.staging = false;
    --w.in_flight;
  }
  TouchLocked(worker);
}

absl::StatusOr<bool> PsShard::CommitInitialize(int worker, int64_t step, int64_t total_steps) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = CheckWorker(worker); !s.ok()) return s;
  if (initialized_) return false;
  const Worker& w = workers_[worker];
  for (size_t i = 0; i < w.slot.size(); ++i) {
    if (!std::isfinite(w.slot.data()[i])) {
      return absl::InvalidArgumentError("initial parameters contain NaN/Inf");
    }
  }
  optim::LrScheduleOptions lr = opt_.lr;
  if (lr.total_steps == 0) lr.total_steps = std::max<int64_t>(total_steps, 1);
  absl::StatusOr<optim::LrSchedule> schedule = optim::LrSchedule::Create(lr);
  if (!schedule.ok()) return schedule.status();
  schedule_ = *schedule;
  std::copy(w.slot.data(), w.slot.data() + w.slot.size(), MutableParamsLocked().data());
  global_step_ = std::max<int64_t>(step, 0);
  total_steps_ = total_steps;
  initialized_ = true;
  ++version_;
  last_checkpoint_step_ = global_step_;
  log_(absl::StrCat("initialised by ", w.name, " at step ", global_step_, ": ", range_.length,
                    " parameters [", range_.offset, ", ", range_.end(), ")"));
  cv_.notify_all();
  return true;
}

void PsShard::CountRejected(metrics::RejectReason reason, const std::string& message) {
  if (metrics_ != nullptr) metrics_->AddRejectedPush(reason);
  std::lock_guard<std::mutex> lock(mu_);
  ++rejected_;
  log_(absl::StrCat("rejected push: ", message));
}

std::span<float> PsShard::MutableParamsLocked() {
  // A pinned buffer stays as its readers saw it: the update goes to a
  // free buffer, which first gets the current parameters.
  std::shared_ptr<AlignedBuffer> out = params_pool_.Writable(
      params_, [&] { return std::make_shared<AlignedBuffer>(params_->size()); });
  if (out != params_) {
    std::copy(params_->data(), params_->data() + params_->size(), out->data());
    params_ = std::move(out);
  }
  return params_->span();
}

// The optimizer runs on the calling thread (gRPC's or the data plane's),
// flushing subnormal values (denormals.h).
void PsShard::ApplyLocked(std::span<const float> grad) {
  const ScopedFlushDenormals flush;
  optimizer_->Apply(MutableParamsLocked(), grad, schedule_->At(global_step_));
  ++global_step_;
  ++version_;
  ++applied_;
}

void PsShard::ApplyLocked(optim::Optimizer::GradientBlocks fill) {
  const ScopedFlushDenormals flush;
  optimizer_->ApplyBlocks(MutableParamsLocked(), fill, schedule_->At(global_step_));
  ++global_step_;
  ++version_;
  ++applied_;
}

absl::StatusOr<PushResult> PsShard::CommitPush(int worker, int64_t step,
                                               std::optional<int64_t> nonfinite) {
  if (worker < 0 || worker >= static_cast<int>(workers_.size())) {
    std::lock_guard<std::mutex> lock(mu_);
    return CheckWorker(worker);
  }
  // The caller staged this slot (BeginStaging), so no one else touches it:
  // scan it for NaN/Inf (unless the caller counted while filling it) before
  // taking the lock other workers wait on.
  Worker& w = workers_[worker];
  const float* g = w.slot.data();
  int64_t bad = 0;
  if (nonfinite.has_value()) {
    bad = *nonfinite;
  } else {
    for (size_t i = 0; i < w.slot.size(); ++i) bad += std::isfinite(g[i]) ? 0 : 1;
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (absl::Status s = CheckWorker(worker); !s.ok()) return s;
  if (bad > 0) {
    ++rejected_;
    if (metrics_ != nullptr) metrics_->AddRejectedPush(metrics::RejectReason::kNonFinite);
    const std::string msg = absl::StrCat("gradient from ", w.name, " for step ", step, " has ", bad,
                                         " NaN/Inf values; rejected, parameters untouched");
    log_(msg);
    return absl::InvalidArgumentError(msg);
  }
  PushResult r;
  const PushVerdict verdict = rule_->JudgePush(step, w.clock, global_step_);
  if (verdict.kind == PushVerdict::kFuture) {
    ++rejected_;
    if (metrics_ != nullptr) metrics_->AddRejectedPush(metrics::RejectReason::kFutureStep);
    const std::string msg = absl::StrCat("push from ", w.name, " for step ", step, verdict.reason);
    log_(msg);
    return absl::InvalidArgumentError(msg);
  }
  if (verdict.kind == PushVerdict::kStale) {
    ++stale_;
    r.global_step = global_step_;
    return r;  // e.g. a backup worker's late gradient: dropped
  }
  if (rule_->lockstep() && pipelined_) {
    // The whole gradient at once (gRPC, or a step that is not pipelined):
    // every chunk of it counts in the round.
    w.accepted = true;
    w.ready = num_chunks_;
    ++accepted_count_;
    r.accepted = true;
    AdvanceRoundLocked();
    r.global_step = global_step_;
    return r;
  }
  if (rule_->lockstep()) {
    w.accepted = true;
    ++accepted_count_;
    r.accepted = true;
    if (accepted_count_ >= rule_->GradientsPerUpdate(opt_.num_workers - done_count_)) {
      // Sum in worker order so the result never depends on arrival order,
      // and average, a block at a time right before the optimizer reads it:
      // the sum never goes through memory whole.
      std::vector<const float*> slots;
      for (Worker& o : workers_) {
        if (!o.accepted) continue;
        slots.push_back(o.slot.data());
        o.accepted = false;
      }
      accepted_count_ = 0;
      ApplyLocked([&](size_t b, size_t e, float* out) { AverageSlots(slots, b, e - b, out); });
      for (Worker& o : workers_) o.clock = global_step_;
      MaybeCheckpointLocked();
      cv_.notify_all();
    }
    r.global_step = global_step_;
    return r;
  }
  // Staleness: updates applied since this worker pulled the parameters
  // its gradient was computed from.
  if (metrics_ != nullptr) metrics_->RecordStaleness(global_step_ - w.pulled_step);
  ApplyLocked(std::span<const float>(g, w.slot.size()));
  ++w.clock;
  r.accepted = true;
  r.global_step = global_step_;
  MaybeCheckpointLocked();
  cv_.notify_all();
  return r;
}

absl::StatusOr<bool> PsShard::PushChunk(int worker, int64_t step, int64_t chunk,
                                        int64_t nonfinite) {
  std::unique_lock<std::mutex> lock(mu_);
  if (absl::Status s = CheckWorker(worker); !s.ok()) return s;
  if (!pipelined_) return absl::FailedPreconditionError("this shard does not pipeline steps");
  Worker& w = workers_[worker];
  if (!w.staging || chunk != w.ready || chunk >= num_chunks_) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", chunk, " of ", w.name,
                                                   "'s push out of order (expected ", w.ready,
                                                   " of ", num_chunks_, ")"));
  }
  TouchLocked(worker);
  // NaN/Inf first, as CommitPush: a bad gradient is refused whatever its step.
  if (nonfinite > 0) {
    ++rejected_;
    if (metrics_ != nullptr) metrics_->AddRejectedPush(metrics::RejectReason::kNonFinite);
    const std::string msg =
        absl::StrCat("gradient from ", w.name, " for step ", step, " has ", nonfinite,
                     " NaN/Inf values in chunk ", chunk, "; rejected, parameters untouched");
    log_(msg);
    if (w.ready > 0) {  // its earlier chunks no longer count
      w.ready = 0;
      if (round_.applied > 0) RollBackRoundLocked();
    }
    return absl::InvalidArgumentError(msg);
  }
  if (chunk == 0) {
    const PushVerdict verdict = rule_->JudgePush(step, w.clock, global_step_);
    if (verdict.kind == PushVerdict::kFuture) {
      ++rejected_;
      if (metrics_ != nullptr) metrics_->AddRejectedPush(metrics::RejectReason::kFutureStep);
      const std::string msg =
          absl::StrCat("push from ", w.name, " for step ", step, verdict.reason);
      log_(msg);
      return absl::InvalidArgumentError(msg);
    }
    if (verdict.kind == PushVerdict::kStale) {
      ++stale_;
      return false;
    }
  } else if (step != global_step_) {
    return absl::InternalError(absl::StrCat(
        w.name, "'s push for step ", step, " outlived its round (global step ", global_step_, ")"));
  }
  ++w.ready;
  if (w.ready == num_chunks_) {
    w.accepted = true;
    ++accepted_count_;
  }
  AdvanceRoundLocked();
  return true;
}

void PsShard::AbortPush(int worker) {
  std::lock_guard<std::mutex> lock(mu_);
  if (worker < 0 || worker >= static_cast<int>(workers_.size())) return;
  Worker& w = workers_[worker];
  if (w.accepted || w.ready == 0) return;  // complete (it counts) or nothing taken
  w.ready = 0;
  if (round_.applied > 0) {
    log_(absl::StrCat(w.name, "'s push broke off; rolling back the chunks of step ", global_step_,
                      " applied so far"));
    RollBackRoundLocked();
  }
}

void PsShard::AdvanceRoundLocked() {
  if (!pipelined_ || !initialized_) return;
  int64_t ready = num_chunks_;
  std::vector<const float*> slots;  // in worker order: the sum never depends on arrival
  for (const Worker& w : workers_) {
    // A finished worker no longer holds the round back, but a gradient it
    // delivered whole before finishing counts, as on the plain path.
    if (w.done && !w.accepted) continue;
    ready = std::min(ready, w.ready);
    slots.push_back(w.slot.data());
  }
  if (slots.empty() || round_.applied >= ready) return;
  if (round_.applied == 0) {
    // A buffer no sender holds, never the current parameters: those stay
    // as they are until the round commits, for readers and for a rollback.
    round_.next = params_pool_.Writable(
        nullptr, [&] { return std::make_shared<AlignedBuffer>(params_->size()); });
  }
  const std::vector<std::span<float>>& state = optimizer_state_;
  if (round_.undo.size() != state.size()) {
    round_.undo.clear();
    for (std::span<float> st : state) round_.undo.emplace_back(st.size());
  }
  const float lr = schedule_->At(global_step_);
  const float* cur = params_->data();
  float* next = round_.next->data();
  const ScopedFlushDenormals flush;
  for (int64_t c = round_.applied; c < ready; ++c) {
    const size_t b = static_cast<size_t>(c * chunk_values_);
    const size_t e =
        std::min(static_cast<size_t>(range_.length), b + static_cast<size_t>(chunk_values_));
    std::copy(cur + b, cur + e, next + b);
    for (size_t k = 0; k < state.size(); ++k) {
      std::copy(state[k].data() + b, state[k].data() + e, round_.undo[k].data() + b);
    }
    optimizer_->ApplyPart(
        std::span<float>(next + b, e - b), b,
        [&](size_t pb, size_t pe, float* out) { AverageSlots(slots, b + pb, pe - pb, out); }, lr);
  }
  round_.applied = ready;
  if (ready == num_chunks_) {
    CommitRoundLocked();
  } else {
    cv_.notify_all();
  }
}

void PsShard::CommitRoundLocked() {
  params_ = std::move(round_.next);
  optimizer_->set_steps(optimizer_->steps() + 1);
  ++global_step_;
  ++version_;
  ++applied_;
  for (Worker& w : workers_) {
    w.accepted = false;
    w.ready = 0;
    w.clock = global_step_;
  }
  accepted_count_ = 0;
  round_.applied = 0;
  committed_attempt_ = round_.attempt++;
  MaybeCheckpointLocked();
  cv_.notify_all();
}

void PsShard::RollBackRoundLocked() {
  const std::vector<std::span<float>>& state = optimizer_state_;
  const size_t n = std::min(static_cast<size_t>(range_.length),
                            static_cast<size_t>(round_.applied * chunk_values_));
  for (size_t k = 0; k < state.size() && k < round_.undo.size(); ++k) {
    std::copy(round_.undo[k].data(), round_.undo[k].data() + n, state[k].data());
  }
  round_.applied = 0;
  round_.next.reset();  // senders of it hold their own pins
  ++round_.attempt;
  cv_.notify_all();
}

absl::StatusOr<RoundRead> PsShard::WaitRound(int worker, int64_t step, uint64_t attempt,
                                             int64_t sent, const std::function<bool()>& cancelled) {
  std::unique_lock<std::mutex> lock(mu_);
  if (absl::Status s = CheckWorker(worker); !s.ok()) return s;
  if (!pipelined_) return absl::FailedPreconditionError("this shard does not pipeline steps");
  Worker& w = workers_[worker];
  ++w.in_flight;
  TouchLocked(worker);
  RoundRead r;
  while (true) {
    if (!aborted_.ok()) {
      --w.in_flight;
      return aborted_;
    }
    if (global_step_ > step || done_count_ >= opt_.num_workers) {
      if (sent > 0 && attempt != committed_attempt_) {
        r.kind = RoundRead::Kind::kRestart;
      } else {
        r.pin = params_;
        r.values = params_->span();
        r.ready = num_chunks_;
        r.attempt = committed_attempt_;
        r.committed = true;
        r.global_step = global_step_;
        r.finished = done_count_ >= opt_.num_workers;
        w.pulled_step = global_step_;
      }
      break;
    }
    if (sent > 0 && attempt != round_.attempt) {
      r.kind = RoundRead::Kind::kRestart;
      break;
    }
    if (round_.applied > sent && step == global_step_) {
      r.pin = round_.next;
      r.values = round_.next->span();
      r.ready = round_.applied;
      r.attempt = round_.attempt;
      break;
    }
    // Checked after everything above, so an abort or chunks that came
    // with the wake-up win over a cancellation (a server stopping right
    // after Abort() must still pass on the abort's reason), as in Read.
    if (cancelled && cancelled()) {
      --w.in_flight;
      return absl::CancelledError("the caller went away");
    }
    cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
  --w.in_flight;
  TouchLocked(worker);
  return r;
}

int64_t PsShard::MinActiveClockLocked() const {
  int64_t m = INT64_MAX;
  for (const Worker& w : workers_) {
    if (!w.done) m = std::min(m, w.clock);
  }
  return m == INT64_MAX ? 0 : m;
}

absl::StatusOr<PullResult> PsShard::Pull(int worker, int64_t min_step, int64_t clock,
                                         std::span<float> out,
                                         const std::function<bool()>& cancelled) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (num_params_ == 0 || out.size() != static_cast<size_t>(range_.length)) {
      return absl::FailedPreconditionError("pull before registration or with a wrong-sized buffer");
    }
  }
  return Read(
      worker, min_step, clock,
      [out](std::span<const float> params, const PullResult&) {
        std::copy(params.begin(), params.end(), out.begin());
      },
      cancelled);
}

absl::StatusOr<PullResult> PsShard::Read(int worker, int64_t min_step, int64_t clock,
                                         const ParamsReader& read,
                                         const std::function<bool()>& cancelled) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool observer = worker == kObserver;
  if (!observer) {
    if (absl::Status s = CheckWorker(worker); !s.ok()) return s;
  }
  if (num_params_ == 0) {
    return absl::FailedPreconditionError("pull before registration");
  }
  Worker dummy;
  Worker& w = observer ? dummy : workers_[worker];
  ++w.in_flight;
  if (!observer) TouchLocked(worker);
  auto ready = [&] {
    if (!aborted_.ok()) return true;
    if (!initialized_) return false;
    if (done_count_ >= opt_.num_workers) return true;
    // Observers long-poll for progress: they wake on a new step or the end.
    if (observer) return global_step_ >= min_step;
    return rule_->MayPull(min_step, clock, ShardClocks{global_step_, MinActiveClockLocked()});
  };
  while (!ready()) {
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    // A wake-up that made the pull ready wins over a cancellation: a server
    // stopping right after Abort() must still answer with the abort's reason
    // (say, the lost peer), not with "the caller went away".
    if (ready()) break;
    if (cancelled && cancelled()) {
      --w.in_flight;
      return absl::CancelledError("the caller went away");
    }
  }
  --w.in_flight;
  if (!observer) TouchLocked(worker);
  if (!aborted_.ok()) return aborted_;
  if (!observer)
    max_ssp_lead_ = std::max(max_ssp_lead_, rule_->Lead(clock, MinActiveClockLocked()));
  w.pulled_step = global_step_;
  PullResult r;
  r.global_step = global_step_;
  r.finished = done_count_ >= opt_.num_workers;
  r.version = version_;
  PullResult pinned = r;
  pinned.pin = params_;
  read(params_->span(), pinned);
  if (observer) {
    observer_seen_ = true;
    observer_told_finished_ = observer_told_finished_ || r.finished;
  }
  return r;
}

bool PsShard::Done(int worker) {
  std::lock_guard<std::mutex> lock(mu_);
  if (worker >= 0 && worker < static_cast<int>(workers_.size()) && !workers_[worker].done) {
    workers_[worker].done = true;
    ++done_count_;
    log_(absl::StrCat(workers_[worker].name, " finished (", done_count_, "/", opt_.num_workers,
                      ")"));
    Worker& w = workers_[worker];
    if (!w.accepted && w.ready > 0) {
      // Finished in the middle of a push: its chunks no longer count.
      w.ready = 0;
      if (round_.applied > 0) RollBackRoundLocked();
    }
    AdvanceRoundLocked();  // the round no longer waits for it
  }
  cv_.notify_all();
  return done_count_ >= opt_.num_workers;
}

int64_t PsShard::global_step() const {
  std::lock_guard<std::mutex> lock(mu_);
  return global_step_;
}

bool PsShard::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_count_ >= opt_.num_workers;
}

bool PsShard::ObserverWaitingForTheEnd() const {
  std::lock_guard<std::mutex> lock(mu_);
  return (observer_seen_ || opt_.expect_observer) && !observer_told_finished_;
}

void PsShard::MaybeCheckpointLocked() {
  if (opt_.checkpoint_dir.empty() || !initialized_) return;
  const double now = clock_.NowSeconds();
  const bool by_steps = opt_.checkpoint_every_steps > 0 &&
                        global_step_ - last_checkpoint_step_ >= opt_.checkpoint_every_steps;
  const bool by_time = opt_.checkpoint_every_seconds > 0 &&
                       now - last_checkpoint_time_ >= opt_.checkpoint_every_seconds;
  if (!by_steps && !by_time) return;
  absl::StatusOr<std::string> path = CheckpointLocked();
  if (!path.ok()) log_(absl::StrCat("checkpoint failed: ", path.status().message()));
}

absl::StatusOr<std::string> PsShard::CheckpointLocked() {
  if (opt_.checkpoint_dir.empty()) {
    return absl::FailedPreconditionError("no --checkpoint-dir configured");
  }
  if (!initialized_) return absl::FailedPreconditionError("nothing to checkpoint yet");
  exchange::CheckpointView view;
  v1::CheckpointHeader& h = view.header;
  h.set_shard_index(opt_.shard_index);
  h.set_num_shards(opt_.num_shards);
  h.mutable_range()->set_offset(static_cast<uint64_t>(range_.offset));
  h.mutable_range()->set_length(static_cast<uint64_t>(range_.length));
  h.set_num_params(static_cast<uint64_t>(num_params_));
  h.set_global_step(global_step_);
  h.set_total_steps(total_steps_);
  h.set_optimizer(opt_.optimizer.kind);
  h.set_optimizer_steps(optimizer_->steps());
  for (const Worker& w : workers_) h.add_worker_clocks(w.clock);
  view.params = std::as_const(*params_).span();
  for (auto& [name, buf] : optimizer_->State()) {
    h.add_state_names(name);
    view.states.push_back(buf);
  }
  const double t0 = clock_.NowSeconds();
  absl::StatusOr<std::string> path =
      exchange::WriteCheckpoint(opt_.checkpoint_dir, view, opt_.keep_checkpoints);
  if (path.ok()) {
    last_checkpoint_step_ = global_step_;
    last_checkpoint_time_ = clock_.NowSeconds();
    if (metrics_ != nullptr) metrics_->RecordCheckpoint(last_checkpoint_time_ - t0);
    log_(absl::StrCat("checkpoint ", *path, " step=", global_step_,
                      " took=", static_cast<int64_t>((last_checkpoint_time_ - t0) * 1000), "ms"));
  }
  return path;
}

absl::StatusOr<std::string> PsShard::WriteCheckpointNow() {
  std::lock_guard<std::mutex> lock(mu_);
  if (round_.applied == 0) return CheckpointLocked();
  // Mid-round, the optimizer state is partly the next step's: write the
  // step before it, then apply the round's chunks again.
  RollBackRoundLocked();
  absl::StatusOr<std::string> path = CheckpointLocked();
  AdvanceRoundLocked();
  return path;
}

void PsShard::Abort(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_.ok()) aborted_ = status;
  cv_.notify_all();
}

std::vector<std::string> PsShard::SilentWorkers(double timeout_seconds) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  const double now = clock_.NowSeconds();
  for (const Worker& w : workers_) {
    if (w.done || w.in_flight > 0) continue;
    const double since = w.registered ? w.last_seen : start_seconds_;
    if (now - since > timeout_seconds) {
      out.push_back(w.registered ? w.name : absl::StrCat(w.name, " (never registered)"));
    }
  }
  return out;
}

int PsShard::ConnectedWorkers() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const Worker& w : workers_) n += w.registered && !w.done ? 1 : 0;
  return n;
}

v1::StatusResponse PsShard::Status() const {
  std::lock_guard<std::mutex> lock(mu_);
  v1::StatusResponse s;
  s.set_global_step(global_step_);
  s.set_incarnation(opt_.incarnation);
  int registered = 0;
  for (const Worker& w : workers_) {
    registered += w.registered ? 1 : 0;
    s.add_worker_clocks(rule_->ReportedClock(w.clock, global_step_));
  }
  s.set_workers_registered(registered);
  s.set_workers_done(done_count_);
  s.set_rejected_pushes(rejected_);
  s.set_stale_pushes(stale_);
  s.set_applied_pushes(applied_);
  s.set_max_ssp_lead(max_ssp_lead_);
  s.set_restored_step(restored_step_);
  return s;
}

}  // namespace kubetrain::ps
