// SyncAggregator: the sync update policy. Gradients the rule accepted for
// the current step wait in their workers' slots; once the rule's
// GradientsPerUpdate of them are in (replicas_to_aggregate, never more
// than the workers still active; fewer than all: backup workers, the late
// ones then being stale to the rule), they are averaged, summed in worker
// order so the result never depends on arrival order, into one update.
//
// Pipelined (every worker aggregated, options.pipeline): the step is a
// round applied chunk by chunk into a buffer of its own as soon as every
// unfinished worker has delivered the chunk, keeping each chunk's old
// optimizer state; a push that breaks off rolls the round back (the
// parameters never changed, the state is restored), and the round commits,
// the buffer becoming the parameters, when every chunk is applied. A whole
// gradient (gRPC, a one-chunk push) joins the round with all its chunks.
//
// Elastic membership: the workers a round waits for are the counted ones
// not done. A worker that joins (Join) is counted from the next round
// boundary; one that finishes or leaves (WorkerDone) is not waited for from
// then on (a whole gradient it delivered before still counts). Backup
// workers keep their meaning: replicas_to_aggregate of the counted workers
// (all of them when fewer are active).
//
// Not thread-safe (update_policy.h).
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_SYNC_AGGREGATOR_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_SYNC_AGGREGATOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "runtime/exchange/ps/consistency_rule.h"
#include "runtime/exchange/ps/update_policy.h"
#include "runtime/tensor/aligned_buffer.h"

namespace kubetrain::ps {

class SyncAggregator final : public UpdatePolicy {
 public:
  // `rule` (borrowed) says how many gradients make an update. `pipeline`:
  // rounds, as above.
  SyncAggregator(const ConsistencyRule& rule, int num_workers, bool pipeline);

  bool Push(ShardParams& params, int worker, std::span<const float> gradient,
            int64_t pulled_step) override;
  bool Holds(int worker) const override {
    return worker >= 0 && worker < static_cast<int>(workers_.size()) && workers_[worker].accepted;
  }
  bool WorkerDone(ShardParams& params, int worker) override;
  bool Join(ShardParams& params, int worker) override;
  bool Counts(int worker) const override;
  int CountedWorkers() const override;

  bool pipelined() const override { return pipeline_; }
  int64_t ChunksIn(int worker) const override { return workers_[worker].ready; }
  bool AddChunk(ShardParams& params, int worker, std::span<const float> gradient) override;
  bool TakeBack(ShardParams& params, int worker) override;
  std::optional<RoundRead> ReadRound(const ShardParams& params, int64_t step, uint64_t attempt,
                                     int64_t sent, bool finished) const override;
  void SuspendRound(ShardParams& params) override;
  void ResumeRound(ShardParams& params) override { Advance(params); }

 private:
  struct Worker {
    const float* gradient = nullptr;  // its slot, while accepted or ready > 0
    bool accepted = false;            // a whole gradient for the current step is in
    bool done = false;                // finished or left: holds no round back
    // A member of the job: rounds wait for it. A worker that joins is
    // counted from the next round boundary (RoundEmpty / Recount).
    bool counted = true;
    bool joining = false;  // joined, counted from the next round boundary
    int64_t ready = 0;     // pipelined: chunks of it that count
  };
  // The step being applied chunk by chunk.
  struct Round {
    uint64_t attempt = 1;                 // changes when the round is rolled back or commits
    int64_t applied = 0;                  // chunks of `next` written
    std::shared_ptr<AlignedBuffer> next;  // the parameters after the step
    std::vector<AlignedBuffer> undo;      // optimizer state before each applied chunk
  };

  // Not pipelined: one averaged update once enough gradients are in.
  // Returns whether it applied one.
  bool MaybeApply(ShardParams& params);
  // Pipelined: applies every chunk all unfinished workers have delivered,
  // and commits the round once all are. Returns whether it applied any.
  bool Advance(ShardParams& params);
  void Commit(ShardParams& params);
  void RollBack(ShardParams& params);
  int64_t NumChunks(const ShardParams& params) const;
  // Nothing of the current round is in yet: a boundary.
  bool RoundEmpty() const;
  // At a round boundary: the workers that joined are counted from now.
  void Recount();
  int ActiveWorkers() const;  // counted and not done

  const ConsistencyRule& rule_;
  const bool pipeline_;
  std::vector<Worker> workers_;
  int accepted_ = 0;
  Round round_;
  uint64_t committed_attempt_ = 0;  // the attempt of the last committed round
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_SYNC_AGGREGATOR_H_
