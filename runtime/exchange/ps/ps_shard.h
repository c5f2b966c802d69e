// PsShard: one parameter-server shard: its parameter range and storage
// (ShardParams: parameters copy-on-write with pins, optimizer state, global
// step, version), the workers' registration, clocks, staging slots and
// liveness, validation of pushes, and checkpoints (CheckpointPolicy). When a
// push is accepted and a pull may read is the mode's ConsistencyRule
// (consistency_rule.h); how accepted gradients become updates is the mode's
// UpdatePolicy (update_policy.h: sync aggregation with pipelined rounds, or
// immediate apply). No networking: the gRPC service and the data plane
// decode chunks into the slot BeginStaging hands out and call in.
//
// Thread-safe: every public method may be called from any gRPC thread; one
// mutex (mu_) guards the state, the policies included.
// Pull and WaitInitialized block (on condition variables, never spinning)
// until their condition holds, the shard is aborted, or `cancelled()` says
// the caller went away.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_SHARD_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_SHARD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "kubetrain/v1/parameter_server.pb.h"
#include "runtime/exchange/checkpoint_policy.h"
#include "runtime/exchange/ps/consistency_rule.h"
#include "runtime/exchange/ps/exchange_mode.h"
#include "runtime/exchange/ps/shard_params.h"
#include "runtime/exchange/ps/shard_range.h"
#include "runtime/exchange/ps/update_policy.h"
#include "runtime/metrics/runtime_metrics.h"
#include "runtime/optim/lr_schedule.h"
#include "runtime/optim/optimizer.h"
#include "runtime/tensor/aligned_buffer.h"

namespace kubetrain::ps {

struct PsShardOptions {
  int shard_index = 0;
  int num_shards = 1;
  int num_workers = 1;  // training replicas: chief + workers (the cluster spec's)
  // Elastic workers: a worker whose id is not among the cluster spec's may
  // register (join) while the job runs, as long as its id is below this.
  // Sync rounds count it from the next round boundary.
  int max_workers = 1024;
  std::vector<std::string> worker_names;
  // The cluster has an evaluator: after the workers finish, wait for it to
  // learn so (see ObserverWaitingForTheEnd).
  bool expect_observer = false;  // for logs ("worker-1"); default "worker <id>"
  ExchangeMode mode;
  int replicas_to_aggregate = 0;  // sync: gradients per update (0 = num_workers)
  optim::OptimizerOptions optimizer;
  optim::LrScheduleOptions lr;  // total_steps comes from Initialize when 0
  // Checkpoints, as checkpoint_policy.h says (a failed periodic write is
  // logged and counted; WriteCheckpointNow returns its error).
  std::string checkpoint_dir;  // empty: no checkpoints
  int64_t checkpoint_every_steps = 0;
  double checkpoint_every_seconds = 0;
  int keep_checkpoints = 3;
  uint64_t incarnation = 0;
  // Sync steps aggregating every worker are applied chunk by chunk
  // (data_plane::ChunkValues) as soon as every worker's gradient for the
  // chunk has arrived, and the new parameters flow back chunk by chunk
  // (PushChunk, WaitRound): the data plane's pipelined steps. A bad or
  // broken push rolls the round back, so it still changes nothing. Ignored
  // (pipelined() false) in other modes and with backup workers.
  bool pipeline = false;
};

struct RegisterInfo {
  Range range;
  bool initialized = false;
  int64_t global_step = 0;
  int64_t worker_clock = 0;
  // Where the parameters came from (initialized only): a checkpoint, or the
  // named worker's Initialize.
  bool restored_from_checkpoint = false;
  std::string initialized_by;
  int workers_counted = -1;  // sync: the current round's members; -1 otherwise
};

struct PushResult {
  bool accepted = false;
  int64_t global_step = 0;
};

struct PullResult {
  int64_t global_step = 0;
  bool finished = false;
  // Changes whenever the parameters do (an update, initialisation or
  // restore): equal versions mean equal parameters.
  uint64_t version = 0;
  // Set only in the result Read() hands its ParamsReader: holding it keeps
  // the parameters `read` saw unchanged after Read() returns (the shard's
  // next update writes a copy instead), so a sender can send from them
  // without a snapshot of its own. Drop it soon: while it is held, every
  // update copies the parameters first.
  std::shared_ptr<const void> pin;
};

// Worker id of read-only callers (evaluators): they never wait for clocks.
inline constexpr int kObserver = -1;

class PsShard {
 public:
  using Logger = std::function<void(const std::string&)>;

  // `metrics` (borrowed, may be null) gets rejections, worker restarts,
  // staleness and checkpoints.
  PsShard(PsShardOptions options, const Clock& clock, Logger log,
          metrics::RuntimeMetrics* metrics = nullptr);
  PsShard(const PsShard&) = delete;
  PsShard& operator=(const PsShard&) = delete;

  // Loads the newest valid checkpoint, if any; returns its global step or
  // -1 when it started fresh.
  absl::StatusOr<int64_t> RestoreFromCheckpoint();

  const PsShardOptions& options() const { return opt_; }
  // This shard's range; empty until the first registration or restore.
  Range range() const;

  // `clock`: the worker's own clock (RegisterRequest.clock). In async/ssp a
  // shard that has no checkpoint behind it (fresh, or restarted empty and
  // re-initialised) takes it when it is ahead of the shard's record.
  absl::StatusOr<RegisterInfo> Register(int worker, int64_t num_params, const std::string& name,
                                        int64_t clock = 0);

  // Buffer (this shard's range) into which a push or initialize from
  // `worker` is decoded before it is committed. Fails for unknown workers
  // or when the worker already has a push in flight; EndStaging releases it.
  absl::StatusOr<std::span<float>> BeginStaging(int worker, int64_t step, bool initialize);
  void EndStaging(int worker);

  // Starting parameters from the initialising worker (in its staging
  // buffer). Ignored (false) when the shard already holds parameters.
  absl::StatusOr<bool> CommitInitialize(int worker, int64_t step, int64_t total_steps);

  // Validates the staged gradient (finite values) and applies it as the
  // mode's ConsistencyRule says. Call only with a slot staged by
  // BeginStaging. Rejections leave the parameters untouched and are counted.
  // `nonfinite`: the NaN/Inf count of the slot when the caller counted it
  // while filling the slot (ReceivedFrame::DecodeInto does); otherwise the
  // slot is scanned here.
  absl::StatusOr<PushResult> CommitPush(int worker, int64_t step,
                                        std::optional<int64_t> nonfinite = std::nullopt);

  // Pipelined mode (pipelined()): chunk `chunk` (in order from 0) of a push
  // staged by BeginStaging has arrived in the slot and passed its checksum;
  // `nonfinite` is its NaN/Inf count. Returns false when the push is stale
  // (its step is over: the caller drops the rest and sends the parameters).
  // A NaN/Inf chunk or a push from the future is refused and counted, and
  // the push's earlier chunks are taken back (AbortPush).
  absl::StatusOr<bool> PushChunk(int worker, int64_t step, int64_t chunk, int64_t nonfinite);
  // A pipelined push that will not complete (a corrupt chunk, a lost
  // connection): its chunks no longer count, and the round is rolled back
  // if it had applied any.
  void AbortPush(int worker);
  // Pipelined mode: waits until the round of `step` (the worker's push)
  // has chunks beyond the `sent` the caller already sent under `attempt`,
  // has been rolled back since (kRestart: send again from chunk 0), or has
  // committed. A step already over (a stale or repeated push) is answered
  // with the current parameters, committed.
  absl::StatusOr<RoundRead> WaitRound(int worker, int64_t step, uint64_t attempt, int64_t sent,
                                      const std::function<bool()>& cancelled);
  bool pipelined() const { return pipelined_; }

  // Counts a push rejected before commit (bad size or offset, bad chunk).
  void CountRejected(metrics::RejectReason reason, const std::string& message);

  // Waits as the mode requires (observers: until global_step >= min_step
  // or the job finished), then copies this shard's parameters into `out`
  // (range length).
  absl::StatusOr<PullResult> Pull(int worker, int64_t min_step, int64_t clock, std::span<float> out,
                                  const std::function<bool()>& cancelled);

  // Waits as Pull does, then calls `read` with this shard's parameters
  // while holding the shard's lock (no update can run meanwhile), so the
  // caller can encode them without a private copy; or keep `r.pin` and
  // read them after the lock is released. `read` must not call back into
  // the shard.
  using ParamsReader = std::function<void(std::span<const float> params, const PullResult& r)>;
  absl::StatusOr<PullResult> Read(int worker, int64_t min_step, int64_t clock,
                                  const ParamsReader& read, const std::function<bool()>& cancelled);

  // Marks the worker finished; true when every worker has finished.
  bool Done(int worker);
  // The worker leaves the running job (scale-down, SIGTERM): rounds no
  // longer wait for it (a whole gradient it delivered still counts), its
  // silence is no lost peer, and the job goes on without it. It may join
  // again by registering. True when every other worker has finished.
  bool Leave(int worker, const std::string& reason);
  // Whether `worker` is an id this shard knows (registered, or in the
  // cluster spec): other ids are refused as unknown.
  bool KnownWorker(int worker) const;
  bool finished() const;
  int64_t global_step() const;
  // True when an observer (evaluator) is expected or has pulled, but none
  // has yet been told the job finished: the server lingers so it can be.
  bool ObserverWaitingForTheEnd() const;

  // Writes a checkpoint now; returns its path, and sets `*step` (when not
  // null) to the global step it holds.
  absl::StatusOr<std::string> WriteCheckpointNow(int64_t* step = nullptr);

  // Wakes every waiter with `status` and refuses further work.
  void Abort(const absl::Status& status);

  // Workers (by name) that have not been heard from for `timeout` seconds
  // while not finished; includes workers that never registered, measured
  // from the shard's start.
  std::vector<std::string> SilentWorkers(double timeout_seconds) const;
  // Workers registered and not finished.
  int ConnectedWorkers() const;

  v1::StatusResponse Status() const;

 private:
  struct Worker {
    bool registered = false;
    bool done = false;
    bool left = false;  // left the job (Leave) and has not joined again
    bool staging = false;
    std::string name;
    // Pushes accepted whole (CommitPush): async and ssp judge and report a
    // worker by it; sync by the global step (ConsistencyRule::ReportedClock).
    int64_t clock = 0;
    int64_t pulled_step = 0;  // global step of the parameters it last pulled
    int64_t in_flight = 0;    // calls in progress (a blocked Pull is alive)
    double last_seen = 0;
    AlignedBuffer slot;  // staging; a sync gradient waits here (UpdatePolicy)
  };

  absl::Status CheckWorker(int worker) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status EnsureLayoutLocked(int64_t num_params) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The slot of a worker with a push staged (BeginStaging): the caller's
  // alone until EndStaging; its buffer stays where it is while workers_
  // grows (joins), so CommitPush scans it after releasing the lock.
  std::span<const float> StagedSlot(int worker) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a call into the update policy that returned `moved`: waiters
  // wake if it moved anything, and a checkpoint is written if one is due
  // and the global step moved past `step_before`.
  void AfterUpdateLocked(int64_t step_before, bool moved) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status FillCheckpointLocked(exchange::CheckpointContents& c)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t MinActiveClockLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A member of the job: not left, and in the cluster spec or registered
  // (an id between the spec's and a joiner's never joined).
  bool MemberLocked(int worker) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TouchLocked(int worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RejectLocked(metrics::RejectReason reason, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every worker finished or left, and at least one finished.
  bool FinishedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const PsShardOptions opt_;
  const std::unique_ptr<const ConsistencyRule> rule_;
  const Clock& clock_;
  Logger log_;
  metrics::RuntimeMetrics* const metrics_;
  const double start_seconds_;

  mutable absl::Mutex mu_;
  absl::CondVar cv_;  // with mu_: the parameters, a round or the job moved
  // Chosen from the mode (MakeUpdatePolicy); its state is guarded by mu_.
  const std::unique_ptr<UpdatePolicy> policy_ ABSL_PT_GUARDED_BY(mu_);
  const bool pipelined_;
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
  int64_t num_params_ ABSL_GUARDED_BY(mu_) = 0;
  Range range_ ABSL_GUARDED_BY(mu_);
  int64_t total_steps_ ABSL_GUARDED_BY(mu_) = 0;
  ShardParams params_ ABSL_GUARDED_BY(mu_);
  exchange::CheckpointPolicy checkpoints_ ABSL_GUARDED_BY(mu_);
  std::vector<Worker> workers_ ABSL_GUARDED_BY(mu_);
  int done_count_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rejected_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t stale_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t max_ssp_lead_ ABSL_GUARDED_BY(mu_) = 0;
  bool observer_seen_ ABSL_GUARDED_BY(mu_) = false;
  bool observer_told_finished_ ABSL_GUARDED_BY(mu_) = false;
  int64_t restored_step_ ABSL_GUARDED_BY(mu_) = -1;
  std::string initialized_by_ ABSL_GUARDED_BY(mu_);  // empty: restored or not yet
  int left_count_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_SHARD_H_
