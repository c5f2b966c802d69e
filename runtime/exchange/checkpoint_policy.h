// CheckpointPolicy: when a replica that keeps training state (a PS shard,
// allreduce rank 0) writes a checkpoint, what goes in its header, and what
// a failed write means. Written once for both; the file format is
// checkpoint.h's.
//
// Cadence: a periodic checkpoint is due after an update once
// `every_steps` steps or `every_seconds` seconds have passed since the last
// attempt (either set to 0 turns that trigger off), counted from Restart()
// (start, initialisation, restore) and from each attempt after it.
//
// The one rule for a failed write:
//  - periodic (MaybeWrite): logged, counted
//    (kubetrain_checkpoint_failures_total) and tried again when the next
//    one is due, one interval after the failed attempt (so a full disk
//    costs one failed write per interval, not one per step); training goes
//    on, since a lost checkpoint only widens what a restart repeats;
//  - final or explicitly requested (WriteNow: the last step, SIGTERM, the
//    Checkpoint RPC): the error is returned to the caller, who asked for
//    that checkpoint and must know it does not exist.
//
// Not thread-safe: its owner serialises the calls (PsShard under its
// mutex; AllreduceExchange on the trainer's thread).
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_CHECKPOINT_POLICY_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_CHECKPOINT_POLICY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "base/clock.h"
#include "runtime/exchange/checkpoint.h"
#include "runtime/metrics/runtime_metrics.h"

namespace kubetrain::exchange {

// Writes `view` under `dir`, keeping the newest `keep`; returns the path.
// The filesystem seam: WriteCheckpoint (checkpoint.h) unless a test swaps it.
using CheckpointWriter = std::function<absl::StatusOr<std::string>(
    const std::string& dir, const CheckpointView& view, int keep)>;

struct CheckpointPolicyOptions {
  std::string dir;  // empty: no checkpoints (enabled() is false)
  int64_t every_steps = 0;
  double every_seconds = 0;
  int keep = 3;
  CheckpointWriter write = nullptr;  // WriteCheckpoint
};

// What one checkpoint holds, in host memory, as its writer fills it.
struct CheckpointContents {
  int shard_index = 0;
  int num_shards = 1;
  int64_t offset = 0;      // of `params` in the flat parameter vector
  int64_t num_params = 0;  // of the whole flat vector
  int64_t total_steps = 0;
  std::string optimizer;  // OptimizerOptions::kind
  int64_t optimizer_steps = 0;
  std::span<const float> params;
  std::vector<std::pair<std::string, std::span<const float>>> states;  // named optimizer state
  std::vector<int64_t> worker_clocks;                                  // PS shards
  // The data position after the checkpoint's step, where the writer knows
  // it; unset (the default) writes a header without one, which a reader
  // derives from the global step (checkpoint.h, DataPositionOf).
  std::optional<DataPosition> data_position;
  std::vector<int> left_workers;  // PS shards: workers that left the job
};

class CheckpointPolicy {
 public:
  using Logger = std::function<void(const std::string&)>;
  // Fills everything but the global step (the policy's `step` argument).
  // An error (say, a device copy) counts as a failed write.
  using Fill = absl::FunctionRef<absl::Status(CheckpointContents&)>;

  // `metrics` (borrowed, may be null) gets written checkpoints, their
  // duration and failed periodic writes.
  CheckpointPolicy(CheckpointPolicyOptions options, const Clock& clock, Logger log,
                   metrics::RuntimeMetrics* metrics = nullptr);
  CheckpointPolicy(const CheckpointPolicy&) = delete;
  CheckpointPolicy& operator=(const CheckpointPolicy&) = delete;

  bool enabled() const { return !options_.dir.empty(); }
  const std::string& dir() const { return options_.dir; }

  // The cadence starts over at `step`, now: after start, initialisation or
  // a restore, which need no checkpoint of their own.
  void Restart(int64_t step);

  // Whether a periodic checkpoint is due at `step`.
  bool Due(int64_t step) const;

  // After the update that reached `step`: writes a checkpoint when one is
  // due. Returns whether one was written; a failure is logged and counted
  // and training goes on (the header's rule).
  bool MaybeWrite(int64_t step, Fill fill);

  // Writes one now (a final or requested checkpoint); returns its path or
  // the error. FailedPrecondition when checkpoints are off.
  absl::StatusOr<std::string> WriteNow(int64_t step, Fill fill);

  int64_t failures() const { return failures_; }

 private:
  absl::StatusOr<std::string> Write(int64_t step, Fill fill);

  const CheckpointPolicyOptions options_;
  const Clock& clock_;
  const Logger log_;
  metrics::RuntimeMetrics* const metrics_;
  int64_t last_step_ = 0;
  double last_seconds_ = 0;
  int64_t failures_ = 0;
};

}  // namespace kubetrain::exchange

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_CHECKPOINT_POLICY_H_
