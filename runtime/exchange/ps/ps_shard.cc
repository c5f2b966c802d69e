#include "runtime/exchange/ps/ps_shard.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "runtime/exchange/checkpoint.h"
#include "runtime/exchange/ps/ps_refusal.h"
#include "runtime/exchange/ps/tcp_wire_format.h"

namespace kubetrain::ps {

PsShard::PsShard(PsShardOptions options, const Clock& clock, Logger log,
                 metrics::RuntimeMetrics* metrics)
    : opt_(std::move(options)),
      rule_(MakeConsistencyRule(opt_.mode, opt_.num_workers, opt_.replicas_to_aggregate)),
      clock_(clock),
      log_(std::move(log)),
      metrics_(metrics),
      start_seconds_(clock.NowSeconds()),
      policy_(MakeUpdatePolicy({.mode = opt_.mode,
                                .num_workers = opt_.num_workers,
                                .replicas_to_aggregate = opt_.replicas_to_aggregate,
                                .pipeline = opt_.pipeline},
                               *rule_, metrics)),
      pipelined_(policy_->pipelined()),
      checkpoints_({.dir = opt_.checkpoint_dir,
                    .every_steps = opt_.checkpoint_every_steps,
                    .every_seconds = opt_.checkpoint_every_seconds,
                    .keep = opt_.keep_checkpoints},
                   clock, log_, metrics),
      workers_(static_cast<size_t>(std::max(opt_.num_workers, 1))) {
  for (size_t i = 0; i < workers_.size(); ++i) {
    workers_[i].name =
        i < opt_.worker_names.size() ? opt_.worker_names[i] : absl::StrCat("worker ", i);
  }
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
  const Range range = ShardRange(num_params, opt_.num_shards, opt_.shard_index);
  const size_t n = static_cast<size_t>(range.length);
  if (absl::Status s = params_.Allocate(n, opt_.optimizer); !s.ok()) return s;
  num_params_ = num_params;
  range_ = range;
  for (Worker& w : workers_) w.slot = AlignedBuffer(n);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PsShard::RestoreFromCheckpoint() {
  if (opt_.checkpoint_dir.empty()) return -1;
  absl::StatusOr<exchange::CheckpointData> ckpt =
      exchange::LoadLatestCheckpoint(opt_.checkpoint_dir, opt_.shard_index, opt_.num_shards, log_);
  if (absl::IsNotFound(ckpt.status())) return -1;
  if (!ckpt.ok()) return ckpt.status();
  const v1::CheckpointHeader& h = ckpt->header;
  absl::MutexLock lock(&mu_);
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
  auto state = params_.optimizer().State();
  if (state.size() != ckpt->states.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat(ckpt->path, ": optimizer state does not match this optimizer's"));
  }
  optim::LrScheduleOptions lr = opt_.lr;
  if (lr.total_steps == 0) lr.total_steps = std::max<int64_t>(h.total_steps(), 1);
  absl::StatusOr<optim::LrSchedule> schedule = optim::LrSchedule::Create(lr);
  if (!schedule.ok()) return schedule.status();
  std::copy(ckpt->params.begin(), ckpt->params.end(), params_.Overwrite().data());
  for (size_t i = 0; i < state.size(); ++i) {
    std::copy(ckpt->states[i].begin(), ckpt->states[i].end(), state[i].second.begin());
  }
  params_.optimizer().set_steps(h.optimizer_steps());
  params_.Start(h.global_step(), *std::move(schedule));
  total_steps_ = h.total_steps();
  for (int i = 0; i < h.worker_clocks_size() && i < static_cast<int>(workers_.size()); ++i) {
    workers_[i].clock = h.worker_clocks(i);
  }
  // Workers of the cluster spec that had left stay gone: rounds do not wait
  // for them until they join again. (Workers beyond the spec join again
  // when they re-register.)
  for (int worker : h.left_workers()) {
    if (worker < 0 || worker >= static_cast<int>(workers_.size()) || workers_[worker].left) {
      continue;
    }
    workers_[worker].left = true;
    ++left_count_;
    policy_->WorkerDone(params_, worker);
  }
  restored_step_ = params_.global_step();
  checkpoints_.Restart(params_.global_step());
  log_(absl::StrCat("restored ", ckpt->path, " at global step ", params_.global_step()));
  return params_.global_step();
}

Range PsShard::range() const {
  absl::MutexLock lock(&mu_);
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

bool PsShard::KnownWorker(int worker) const {
  absl::MutexLock lock(&mu_);
  return worker >= 0 && worker < static_cast<int>(workers_.size());
}

bool PsShard::MemberLocked(int worker) const {
  const Worker& w = workers_[worker];
  return !w.left && (worker < opt_.num_workers || w.registered);
}

absl::StatusOr<RegisterInfo> PsShard::Register(int worker, int64_t num_params,
                                               const std::string& name, int64_t clock) {
  absl::MutexLock lock(&mu_);
  if (!aborted_.ok()) return aborted_;
  const int max_workers = std::max(opt_.max_workers, opt_.num_workers);
  if (worker < 0 || worker >= max_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown worker id ", worker, " (this job takes worker ids below ", max_workers, ")"));
  }
  if (worker >= static_cast<int>(workers_.size())) {
    // A worker beyond the cluster spec's joins the running job. The slots
    // keep their buffers as the vector grows (AlignedBuffer moves them).
    const size_t old = workers_.size();
    workers_.resize(static_cast<size_t>(worker) + 1);
    for (size_t i = old; i < workers_.size(); ++i) workers_[i].name = absl::StrCat("worker ", i);
  }
  if (absl::Status s = EnsureLayoutLocked(num_params); !s.ok()) return s;
  Worker& w = workers_[worker];
  if (w.slot.size() != static_cast<size_t>(range_.length)) {
    w.slot = AlignedBuffer(static_cast<size_t>(range_.length));
  }
  if (!name.empty()) w.name = name;
  // A new member: an id the cluster spec did not list registering for the
  // first time (in this incarnation), or a worker that left coming back. A
  // member registering again (restarted) keeps its place.
  const bool joining = w.left || (worker >= opt_.num_workers && !w.registered);
  if (w.registered && !joining) {
    log_(absl::StrCat(w.name, " re-registered at clock ", w.clock));
    if (metrics_ != nullptr) metrics_->AddPeerRestart(metrics::PeerRole::kWorker);
  }
  w.registered = true;
  TouchLocked(worker);
  if (!rule_->lockstep() && restored_step_ < 0 && clock > w.clock) {
    // async/ssp, no checkpoint behind this incarnation (it came back empty
    // and a worker re-initialised it): the worker's own clock stands.
    w.clock = clock;
  }
  if (joining) {
    if (w.left) {
      w.left = false;
      --left_count_;
    }
    if (!rule_->lockstep()) {
      // async/ssp: it starts level with the slowest member, so it holds no
      // one back under the ssp bound.
      int64_t slowest = INT64_MAX;
      for (size_t i = 0; i < workers_.size(); ++i) {
        if (static_cast<int>(i) == worker || workers_[i].done ||
            !MemberLocked(static_cast<int>(i))) {
          continue;
        }
        slowest = std::min(slowest, workers_[i].clock);
      }
      if (slowest != INT64_MAX) w.clock = slowest;
    }
    const int64_t before = params_.global_step();
    AfterUpdateLocked(before, policy_->Join(params_, worker));
    const int counted = policy_->CountedWorkers();
    log_(absl::StrCat(w.name, " joined at step ", params_.global_step(),
                      counted < 0
                          ? absl::StrCat(" at clock ", w.clock)
                          : absl::StrCat("; counted from step ",
                                         params_.global_step() + (policy_->Counts(worker) ? 0 : 1),
                                         " (this round counts ", counted, " workers)")));
  }
  RegisterInfo info;
  info.range = range_;
  info.initialized = params_.started();
  info.global_step = params_.global_step();
  info.worker_clock = rule_->ReportedClock(w.clock, params_.global_step());
  info.restored_from_checkpoint = params_.started() && initialized_by_.empty();
  info.initialized_by = initialized_by_;
  info.workers_counted = policy_->CountedWorkers();
  return info;
}

absl::StatusOr<std::span<float>> PsShard::BeginStaging(int worker, int64_t step, bool initialize) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckWorker(worker); !s.ok()) return s;
  Worker& w = workers_[worker];
  if (!w.registered || num_params_ == 0) {
    return absl::FailedPreconditionError(absl::StrCat(w.name, " has not registered"));
  }
  if (w.staging) {
    return absl::UnavailableError(absl::StrCat(w.name, " already has a push in flight"));
  }
  if (!initialize && !params_.started()) {
    return WithPsRefusal(
        absl::FailedPreconditionError("the shard has no parameters yet (not initialised)"),
        PsRefusal::kUninitialised);
  }
  if (!initialize && policy_->Holds(worker)) {
    // A restarted worker repeating the step it had already contributed.
    ++stale_;
    return absl::AlreadyExistsError(
        absl::StrCat(w.name, " already pushed a gradient for step ", params_.global_step()));
  }
  w.staging = true;
  ++w.in_flight;
  TouchLocked(worker);
  return std::span<float>(w.slot.data(), w.slot.size());
}

void PsShard::EndStaging(int worker) {
  absl::MutexLock lock(&mu_);
  if (worker < 0 || worker >= static_cast<int>(workers_.size())) return;
  Worker& w = workers_[worker];
  if (w.staging) {
    w.staging = false;
    --w.in_flight;
  }
  TouchLocked(worker);
}

absl::StatusOr<bool> PsShard::CommitInitialize(int worker, int64_t step, int64_t total_steps) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckWorker(worker); !s.ok()) return s;
  if (params_.started()) return false;
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
  std::copy(w.slot.data(), w.slot.data() + w.slot.size(), params_.Overwrite().data());
  params_.Start(std::max<int64_t>(step, 0), *std::move(schedule));
  total_steps_ = total_steps;
  initialized_by_ = w.name;
  checkpoints_.Restart(params_.global_step());
  log_(absl::StrCat("initialised by ", w.name, " at step ", params_.global_step(), ": ",
                    range_.length, " parameters [", range_.offset, ", ", range_.end(), ")"));
  cv_.SignalAll();
  return true;
}

void PsShard::RejectLocked(metrics::RejectReason reason, const std::string& message) {
  ++rejected_;
  if (metrics_ != nullptr) metrics_->AddRejectedPush(reason);
  log_(message);
}

void PsShard::CountRejected(metrics::RejectReason reason, const std::string& message) {
  absl::MutexLock lock(&mu_);
  RejectLocked(reason, absl::StrCat("rejected push: ", message));
}

std::span<const float> PsShard::StagedSlot(int worker) const {
  return workers_[worker].slot.span();
}

bool PsShard::FinishedLocked() const {
  if (done_count_ == 0) return false;
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (!workers_[i].done && MemberLocked(static_cast<int>(i))) return false;
  }
  return true;
}

void PsShard::AfterUpdateLocked(int64_t step_before, bool moved) {
  if (params_.global_step() != step_before) {
    checkpoints_.MaybeWrite(params_.global_step(), [this](exchange::CheckpointContents& c)
                                                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                                                         return FillCheckpointLocked(c);
                                                       });
  }
  if (moved) cv_.SignalAll();
}

absl::StatusOr<PushResult> PsShard::CommitPush(int worker, int64_t step,
                                               std::optional<int64_t> nonfinite) {
  std::span<const float> g;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = CheckWorker(worker); !s.ok()) return s;
    g = StagedSlot(worker);
  }
  // The caller staged this slot (BeginStaging), so no one else touches it:
  // scan it for NaN/Inf (unless the caller counted while filling it)
  // without the lock other workers wait on.
  int64_t bad = 0;
  if (nonfinite.has_value()) {
    bad = *nonfinite;
  } else {
    for (float v : g) bad += std::isfinite(v) ? 0 : 1;
  }
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckWorker(worker); !s.ok()) return s;
  Worker& w = workers_[worker];
  if (bad > 0) {
    const std::string msg = absl::StrCat("gradient from ", w.name, " for step ", step, " has ", bad,
                                         " NaN/Inf values; rejected, parameters untouched");
    RejectLocked(metrics::RejectReason::kNonFinite, msg);
    return absl::InvalidArgumentError(msg);
  }
  PushResult r;
  const PushVerdict verdict = rule_->JudgePush(step, w.clock, params_.global_step());
  if (verdict.kind == PushVerdict::kFuture) {
    const std::string msg = absl::StrCat("push from ", w.name, " for step ", step, verdict.reason);
    RejectLocked(metrics::RejectReason::kFutureStep, msg);
    return absl::InvalidArgumentError(msg);
  }
  if (verdict.kind == PushVerdict::kStale) {
    ++stale_;
    r.global_step = params_.global_step();
    return r;  // e.g. a backup worker's late gradient: dropped
  }
  if (!policy_->Counts(worker)) {
    // A worker that joined mid-round (counted from the next) or left: the
    // round is the counted workers'.
    ++stale_;
    r.global_step = params_.global_step();
    return r;
  }
  const int64_t before = params_.global_step();
  const bool moved = policy_->Push(params_, worker, g, w.pulled_step);
  ++w.clock;
  AfterUpdateLocked(before, moved);
  r.accepted = true;
  r.global_step = params_.global_step();
  return r;
}

absl::StatusOr<bool> PsShard::PushChunk(int worker, int64_t step, int64_t chunk,
                                        int64_t nonfinite) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckWorker(worker); !s.ok()) return s;
  if (!pipelined_) return absl::FailedPreconditionError("this shard does not pipeline steps");
  Worker& w = workers_[worker];
  const int64_t expected = policy_->ChunksIn(worker);
  const int64_t num_chunks = data_plane::NumChunks(range_.length);
  if (!w.staging || chunk != expected || chunk >= num_chunks) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", chunk, " of ", w.name,
                                                   "'s push out of order (expected ", expected,
                                                   " of ", num_chunks, ")"));
  }
  TouchLocked(worker);
  // NaN/Inf first, as CommitPush: a bad gradient is refused whatever its step.
  if (nonfinite > 0) {
    const std::string msg =
        absl::StrCat("gradient from ", w.name, " for step ", step, " has ", nonfinite,
                     " NaN/Inf values in chunk ", chunk, "; rejected, parameters untouched");
    RejectLocked(metrics::RejectReason::kNonFinite, msg);
    if (policy_->TakeBack(params_, worker)) cv_.SignalAll();  // its earlier chunks no longer count
    return absl::InvalidArgumentError(msg);
  }
  if (chunk == 0) {
    const PushVerdict verdict = rule_->JudgePush(step, w.clock, params_.global_step());
    if (verdict.kind == PushVerdict::kFuture) {
      const std::string msg =
          absl::StrCat("push from ", w.name, " for step ", step, verdict.reason);
      RejectLocked(metrics::RejectReason::kFutureStep, msg);
      return absl::InvalidArgumentError(msg);
    }
    if (verdict.kind == PushVerdict::kStale) {
      ++stale_;
      return false;
    }
  } else if (step != params_.global_step()) {
    return absl::InternalError(absl::StrCat(w.name, "'s push for step ", step,
                                            " outlived its round (global step ",
                                            params_.global_step(), ")"));
  }
  if (!policy_->Counts(worker)) {
    // Joined mid-round (counted from the next) or left: not this round's.
    if (chunk == 0) ++stale_;
    return false;
  }
  const int64_t before = params_.global_step();
  AfterUpdateLocked(before, policy_->AddChunk(params_, worker, w.slot.span()));
  return true;
}

void PsShard::AbortPush(int worker) {
  absl::MutexLock lock(&mu_);
  if (worker < 0 || worker >= static_cast<int>(workers_.size())) return;
  if (policy_->TakeBack(params_, worker)) {
    log_(absl::StrCat(workers_[worker].name, "'s push broke off; rolling back the chunks of step ",
                      params_.global_step(), " applied so far"));
    cv_.SignalAll();
  }
}

absl::StatusOr<RoundRead> PsShard::WaitRound(int worker, int64_t step, uint64_t attempt,
                                             int64_t sent, const std::function<bool()>& cancelled) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckWorker(worker); !s.ok()) return s;
  if (!pipelined_) return absl::FailedPreconditionError("this shard does not pipeline steps");
  Worker& w = workers_[worker];
  ++w.in_flight;
  TouchLocked(worker);
  std::optional<RoundRead> r;
  while (true) {
    if (!aborted_.ok()) {
      --w.in_flight;
      return aborted_;
    }
    r = policy_->ReadRound(params_, step, attempt, sent, FinishedLocked());
    if (r.has_value()) break;
    // Checked after everything above, so an abort or chunks that came
    // with the wake-up win over a cancellation (a server stopping right
    // after Abort() must still pass on the abort's reason), as in Read.
    if (cancelled && cancelled()) {
      --w.in_flight;
      return absl::CancelledError("the caller went away");
    }
    cv_.WaitWithTimeout(&mu_, absl::Milliseconds(100));
  }
  if (r->committed) w.pulled_step = params_.global_step();
  --w.in_flight;
  TouchLocked(worker);
  return *std::move(r);
}

int64_t PsShard::MinActiveClockLocked() const {
  int64_t m = INT64_MAX;
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (!workers_[i].done && MemberLocked(static_cast<int>(i))) m = std::min(m, workers_[i].clock);
  }
  return m == INT64_MAX ? 0 : m;
}

absl::StatusOr<PullResult> PsShard::Pull(int worker, int64_t min_step, int64_t clock,
                                         std::span<float> out,
                                         const std::function<bool()>& cancelled) {
  {
    absl::MutexLock lock(&mu_);
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
  absl::MutexLock lock(&mu_);
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
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!aborted_.ok()) return true;
    if (!params_.started()) return false;
    if (FinishedLocked()) return true;
    // Observers long-poll for progress: they wake on a new step or the end.
    if (observer) return params_.global_step() >= min_step;
    return rule_->MayPull(min_step, clock,
                          ShardClocks{params_.global_step(), MinActiveClockLocked()});
  };
  while (!ready()) {
    cv_.WaitWithTimeout(&mu_, absl::Milliseconds(100));
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
  if (!observer) {
    max_ssp_lead_ = std::max(max_ssp_lead_, rule_->Lead(clock, MinActiveClockLocked()));
  }
  w.pulled_step = params_.global_step();
  PullResult r;
  r.global_step = params_.global_step();
  r.finished = FinishedLocked();
  r.version = params_.version();
  PullResult pinned = r;
  pinned.pin = params_.Pin();
  read(params_.values(), pinned);
  if (observer) {
    observer_seen_ = true;
    observer_told_finished_ = observer_told_finished_ || r.finished;
  }
  return r;
}

bool PsShard::Leave(int worker, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (worker < 0 || worker >= static_cast<int>(workers_.size())) return FinishedLocked();
  Worker& w = workers_[worker];
  if (w.left || w.done) return FinishedLocked();
  w.left = true;
  ++left_count_;
  const int64_t before = params_.global_step();
  const bool moved = policy_->WorkerDone(params_, worker);
  const int counted = policy_->CountedWorkers();
  log_(absl::StrCat(w.name, " left at step ", before, reason.empty() ? "" : ": ", reason,
                    counted < 0 ? "" : absl::StrCat("; rounds now count ", counted, " workers")));
  AfterUpdateLocked(before, moved);
  cv_.SignalAll();
  return FinishedLocked();
}

bool PsShard::Done(int worker) {
  absl::MutexLock lock(&mu_);
  if (worker >= 0 && worker < static_cast<int>(workers_.size()) && !workers_[worker].done) {
    workers_[worker].done = true;
    ++done_count_;
    log_(absl::StrCat(
        workers_[worker].name, " finished (", done_count_, "/",
        std::max<int>(opt_.num_workers, static_cast<int>(workers_.size()) - left_count_), ")"));
    const int64_t before = params_.global_step();
    AfterUpdateLocked(before, policy_->WorkerDone(params_, worker));
  }
  cv_.SignalAll();
  return FinishedLocked();
}

int64_t PsShard::global_step() const {
  absl::MutexLock lock(&mu_);
  return params_.global_step();
}

bool PsShard::finished() const {
  absl::MutexLock lock(&mu_);
  return FinishedLocked();
}

bool PsShard::ObserverWaitingForTheEnd() const {
  absl::MutexLock lock(&mu_);
  return (observer_seen_ || opt_.expect_observer) && !observer_told_finished_;
}

absl::Status PsShard::FillCheckpointLocked(exchange::CheckpointContents& c) {
  c.shard_index = opt_.shard_index;
  c.num_shards = opt_.num_shards;
  c.offset = range_.offset;
  c.num_params = num_params_;
  c.total_steps = total_steps_;
  c.optimizer = opt_.optimizer.kind;
  c.optimizer_steps = params_.optimizer().steps();
  c.params = params_.values();
  for (auto& [name, buf] : params_.optimizer().State()) c.states.emplace_back(name, buf);
  for (size_t i = 0; i < workers_.size(); ++i) {
    c.worker_clocks.push_back(rule_->ReportedClock(workers_[i].clock, params_.global_step()));
    if (workers_[i].left) c.left_workers.push_back(static_cast<int>(i));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> PsShard::WriteCheckpointNow(int64_t* step) {
  absl::MutexLock lock(&mu_);
  if (!checkpoints_.enabled()) {
    return absl::FailedPreconditionError("no --checkpoint-dir configured");
  }
  if (!params_.started()) return absl::FailedPreconditionError("nothing to checkpoint yet");
  // Mid-round, the optimizer state is partly the next step's: write the
  // step before it, then apply the round's chunks again.
  policy_->SuspendRound(params_);
  if (step != nullptr) *step = params_.global_step();
  absl::StatusOr<std::string> path = checkpoints_.WriteNow(
      params_.global_step(), [this](exchange::CheckpointContents& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                 mu_) { return FillCheckpointLocked(c); });
  policy_->ResumeRound(params_);
  cv_.SignalAll();
  return path;
}

void PsShard::Abort(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (aborted_.ok()) aborted_ = status;
  cv_.SignalAll();
}

std::vector<std::string> PsShard::SilentWorkers(double timeout_seconds) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  const double now = clock_.NowSeconds();
  for (size_t i = 0; i < workers_.size(); ++i) {
    const Worker& w = workers_[i];
    // One that left, or an id that never joined, is no lost peer.
    if (w.done || w.in_flight > 0 || !MemberLocked(static_cast<int>(i))) continue;
    const double since = w.registered ? w.last_seen : start_seconds_;
    if (now - since > timeout_seconds) {
      out.push_back(w.registered ? w.name : absl::StrCat(w.name, " (never registered)"));
    }
  }
  return out;
}

int PsShard::ConnectedWorkers() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const Worker& w : workers_) n += w.registered && !w.done && !w.left ? 1 : 0;
  return n;
}

v1::StatusResponse PsShard::Status() const {
  absl::MutexLock lock(&mu_);
  v1::StatusResponse s;
  s.set_global_step(params_.global_step());
  s.set_incarnation(opt_.incarnation);
  int registered = 0;
  for (const Worker& w : workers_) {
    registered += w.registered ? 1 : 0;
    s.add_worker_clocks(rule_->ReportedClock(w.clock, params_.global_step()));
  }
  s.set_workers_registered(registered);
  s.set_workers_done(done_count_);
  s.set_rejected_pushes(rejected_);
  s.set_stale_pushes(stale_);
  s.set_applied_pushes(params_.updates());
  s.set_max_ssp_lead(max_ssp_lead_);
  s.set_restored_step(restored_step_);
  s.set_workers_counted(policy_->CountedWorkers());
  s.set_workers_left(left_count_);
  return s;
}

}  // namespace kubetrain::ps
