// UpdatePolicy: how a PS shard turns accepted gradients into updates of its
// parameters (ShardParams). One per family of modes, chosen from the mode in
// MakeUpdatePolicy:
//  - SyncAggregator (sync, sync_aggregator.h): gradients wait in their
//    workers' slots until enough of the current step's are in, then one
//    averaged update; with pipelining, rounds applied chunk by chunk.
//  - ImmediateApply (async, ssp, immediate_apply.h): each accepted gradient
//    is one update.
// Whether a push is accepted (stale, from the future) and when a pull may
// read stay the mode's ConsistencyRule (consistency_rule.h): the shard asks
// the rule, then hands what it accepted here. The shard keeps the workers'
// registration, clocks, staging slots and liveness.
//
// Not thread-safe: the shard calls it under its lock, passing its
// ShardParams (guarded by the same lock).
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_UPDATE_POLICY_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_UPDATE_POLICY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "runtime/exchange/ps/consistency_rule.h"
#include "runtime/exchange/ps/exchange_mode.h"
#include "runtime/exchange/ps/shard_params.h"
#include "runtime/metrics/runtime_metrics.h"

namespace kubetrain::ps {

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

// The calls that may change the parameters or a round return whether they
// did (the shard then wakes its waiters; an accepted gradient that only
// waits for others wakes no one).
class UpdatePolicy {
 public:
  virtual ~UpdatePolicy() = default;

  // `worker`'s whole gradient, accepted by the rule for the current step.
  // `gradient` is the worker's slot: it stays unchanged while Holds(worker).
  // `pulled_step`: the global step of the parameters the gradient was
  // computed from.
  virtual bool Push(ShardParams& params, int worker, std::span<const float> gradient,
                    int64_t pulled_step) = 0;
  // True while `worker`'s gradient for the current step waits to be
  // applied: another push from it for this step repeats it.
  virtual bool Holds(int worker) const = 0;
  // `worker` has finished, or left the job: it no longer holds a step
  // back (from this round on: a whole gradient it delivered before still
  // counts), and a push it left half-delivered no longer counts.
  virtual bool WorkerDone(ShardParams& params, int worker) = 0;

  // Elastic membership. `worker` registered as a new member of a running
  // job (an id not seen before, or one that left): a policy with rounds
  // counts it from the next round boundary (at once when the current round
  // has nothing in yet), never in a round already under way. Returns
  // whether anything moved.
  virtual bool Join(ShardParams& /*params*/, int /*worker*/) { return false; }
  // Whether a push from `worker` for the current step counts. False (a
  // worker not counted yet, or one that left): the shard drops it as stale,
  // and the worker's pull waits for the round the counted workers make.
  virtual bool Counts(int /*worker*/) const { return true; }
  // The workers the current round aggregates; -1 where there are no rounds.
  virtual int CountedWorkers() const { return -1; }

  // Pipelined steps, applied chunk by chunk (data_plane::ChunkValues) as
  // every unfinished worker's chunk arrives. Only when pipelined(); the
  // defaults are those of a policy that does not pipeline.
  virtual bool pipelined() const { return false; }
  // Chunks of `worker`'s current push that count: the next one it sends.
  virtual int64_t ChunksIn(int /*worker*/) const { return 0; }
  // Chunk ChunksIn(worker) of `worker`'s push for the current step is
  // whole in its slot `gradient`: it counts, every chunk all unfinished
  // workers have delivered is applied, and the round commits (one step)
  // when all are.
  virtual bool AddChunk(ShardParams& /*params*/, int /*worker*/,
                        std::span<const float> /*gradient*/) {
    return false;
  }
  // `worker`'s push will not complete: its chunks no longer count and a
  // round that applied any is rolled back, the parameters and optimizer
  // state as before it. Returns whether a round was rolled back.
  virtual bool TakeBack(ShardParams& /*params*/, int /*worker*/) { return false; }
  // What a sender of `step`'s round may send, having sent `sent` chunks of
  // `attempt`; nullopt: nothing yet. `finished`: every worker is done.
  virtual std::optional<RoundRead> ReadRound(const ShardParams& /*params*/, int64_t /*step*/,
                                             uint64_t /*attempt*/, int64_t /*sent*/,
                                             bool /*finished*/) const {
    return std::nullopt;
  }
  // A checkpoint holds whole steps: SuspendRound takes back a partly
  // applied round, ResumeRound applies it again.
  virtual void SuspendRound(ShardParams& /*params*/) {}
  virtual void ResumeRound(ShardParams& /*params*/) {}
};

struct UpdatePolicyOptions {
  ExchangeMode mode;
  int num_workers = 1;
  int replicas_to_aggregate = 0;  // sync: gradients per update (0 = num_workers)
  // Sync steps aggregating every worker go in pipelined rounds (ignored
  // otherwise: async pulls read whole versions; backup workers pick whole
  // gradients).
  bool pipeline = false;
};

// The policy of `options.mode`; `rule` (borrowed, outlives it) is the
// mode's ConsistencyRule, `metrics` (borrowed, may be null) gets staleness.
std::unique_ptr<UpdatePolicy> MakeUpdatePolicy(const UpdatePolicyOptions& options,
                                               const ConsistencyRule& rule,
                                               metrics::RuntimeMetrics* metrics);

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_UPDATE_POLICY_H_
