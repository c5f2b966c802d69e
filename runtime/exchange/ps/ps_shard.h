// PsShard: the state of one parameter-server shard: its parameter range,
// optimizer, global step, per-worker clocks and gradient slots; validation of
// pushes; checkpoints. When a push is accepted and a pull may read is the
// mode's ConsistencyRule (consistency_rule.h). No networking: the
// gRPC service decodes chunks into StagingBuffer(worker) and calls in.
//
// Thread-safe: every public method may be called from any gRPC thread.
// Pull and WaitInitialized block (on condition variables, never spinning)
// until their condition holds, the shard is aborted, or `cancelled()` says
// the caller went away.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_SHARD_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_SHARD_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "kubetrain/v1/parameter_server.pb.h"
#include "runtime/exchange/ps/consistency_rule.h"
#include "runtime/exchange/ps/exchange_mode.h"
#include "runtime/exchange/ps/reuse_pool.h"
#include "runtime/exchange/ps/shard_range.h"
#include "runtime/metrics/runtime_metrics.h"
#include "runtime/optim/lr_schedule.h"
#include "runtime/optim/optimizer.h"
#include "runtime/tensor/aligned_buffer.h"

namespace kubetrain::ps {

struct PsShardOptions {
  int shard_index = 0;
  int num_shards = 1;
  int num_workers = 1;  // training replicas: chief + workers
  std::vector<std::string> worker_names;
  // The cluster has an evaluator: after the workers finish, wait for it to
  // learn so (see ObserverWaitingForTheEnd).
  bool expect_observer = false;  // for logs ("worker-1"); default "worker <id>"
  ExchangeMode mode;
  int replicas_to_aggregate = 0;  // sync: gradients per update (0 = num_workers)
  optim::OptimizerOptions optimizer;
  optim::LrScheduleOptions lr;  // total_steps comes from Initialize when 0
  std::string checkpoint_dir;   // empty: no checkpoints
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

// What a pipelined step's sender may send next (PsShard::WaitRound).
struct RoundRead {
  enum class Kind { kChunks, kRestart };
  Kind kind = Kind::kChunks;
  // kChunks: chunks [0, ready) of `values` are final for `attempt`; `pin`
  // keeps them unchanged while held.
  std::shared_ptr<const void> pin;
  std::span<const float> values;
  int64_t ready = 0;
  uint64_t attempt = 0;
  // The round committed: `values` are the parameters after it, all final.
  bool committed = false;
  int64_t global_step = 0;
  bool finished = false;
};

struct RegisterInfo {
  Range range;
  bool initialized = false;
  int64_t global_step = 0;
  int64_t worker_clock = 0;
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

  absl::StatusOr<RegisterInfo> Register(int worker, int64_t num_params, const std::string& name);

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
  bool finished() const;
  int64_t global_step() const;
  // True when an observer (evaluator) is expected or has pulled, but none
  // has yet been told the job finished: the server lingers so it can be.
  bool ObserverWaitingForTheEnd() const;

  absl::StatusOr<std::string> WriteCheckpointNow();

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
    bool staging = false;
    std::string name;
    int64_t clock = 0;        // steps completed (async/ssp); sync uses global_step
    int64_t pulled_step = 0;  // global step of the parameters it last pulled
    int64_t in_flight = 0;    // calls in progress (a blocked Pull is alive)
    double last_seen = 0;
    AlignedBuffer slot;     // staging / sync gradient slot
    bool accepted = false;  // sync: slot holds a gradient for global_step
    int64_t ready = 0;      // pipelined: chunks of the slot that count
  };
  // Pipelined mode: the sync step being applied chunk by chunk.
  struct Round {
    uint64_t attempt = 1;                 // changes when the round is rolled back or commits
    int64_t applied = 0;                  // chunks of `next` written
    std::shared_ptr<AlignedBuffer> next;  // the parameters after the step
    std::vector<AlignedBuffer> undo;      // optimizer state before each applied chunk
  };

  absl::Status CheckWorker(int worker) const;  // requires mu_
  absl::Status EnsureLayoutLocked(int64_t num_params);
  void ApplyLocked(std::span<const float> grad);
  // The same, with the gradient made block by block (a sync step's sum).
  void ApplyLocked(optim::Optimizer::GradientBlocks fill);
  // Pipelined mode: applies every chunk all non-finished workers have
  // delivered, and commits the round once all are.
  void AdvanceRoundLocked();
  void CommitRoundLocked();
  void RollBackRoundLocked();
  void MaybeCheckpointLocked();
  absl::StatusOr<std::string> CheckpointLocked();
  int64_t MinActiveClockLocked() const;
  void TouchLocked(int worker);

  const PsShardOptions opt_;
  const std::unique_ptr<const ConsistencyRule> rule_;
  const bool pipelined_;
  const Clock& clock_;
  Logger log_;
  metrics::RuntimeMetrics* const metrics_;
  // The parameters for writing: if a reader pins them, first a copy in a
  // buffer nobody pins, which becomes params_.
  std::span<float> MutableParamsLocked();

  const double start_seconds_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  absl::Status aborted_;
  int64_t num_params_ = 0;
  Range range_;
  bool initialized_ = false;
  int64_t global_step_ = 0;
  int64_t total_steps_ = 0;
  uint64_t version_ = 0;  // PullResult::version
  // The parameters, copy-on-write: a reader may pin the buffer
  // (PullResult::pin) and send from it unlocked; an update while it is
  // pinned moves to another buffer of params_pool_ first (MutableParams).
  std::shared_ptr<AlignedBuffer> params_;
  ReusePool<AlignedBuffer> params_pool_;
  Round round_;
  uint64_t committed_attempt_ = 0;  // the attempt of the last committed round
  int64_t num_chunks_ = 0;
  int64_t chunk_values_ = 0;
  std::unique_ptr<optim::Optimizer> optimizer_;
  // Its state buffers (fixed once made), for the rounds' per-chunk undo
  // without a State() call per chunk.
  std::vector<std::span<float>> optimizer_state_;
  std::optional<optim::LrSchedule> schedule_;
  std::vector<Worker> workers_;
  int accepted_count_ = 0;
  int done_count_ = 0;
  int64_t rejected_ = 0, stale_ = 0, applied_ = 0;
  int64_t max_ssp_lead_ = 0;
  bool observer_seen_ = false;
  bool observer_told_finished_ = false;
  int64_t restored_step_ = -1;
  int64_t last_checkpoint_step_ = 0;
  double last_checkpoint_time_ = 0;
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_SHARD_H_
