// ConsistencyRule: when a parameter-server shard accepts a pushed gradient
// and when a pull may read, for one update mode (sync, async, ssp). Pure
// decisions over clock values: the shard (PsShard) keeps the state, the
// storage, the optimizer and checkpoints, and asks its rule. One rule per
// mode, each in its own file: sync_rule.h, async_rule.h, ssp_rule.h.
//
// Immutable after construction; thread-safe.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_CONSISTENCY_RULE_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_CONSISTENCY_RULE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/exchange/ps/exchange_mode.h"

namespace kubetrain::ps {

// What the shard should do with a push for a step.
struct PushVerdict {
  enum Kind { kAccept, kStale, kFuture } kind = kAccept;
  // kFuture: why, completing "push from <worker> for step <n>" (e.g.
  // " is from the future: global step is 3").
  std::string reason;
};

// The shard's clocks a pull decision reads.
struct ShardClocks {
  int64_t global_step = 0;
  int64_t min_active_clock = 0;  // smallest clock of the workers not done
};

class ConsistencyRule {
 public:
  virtual ~ConsistencyRule() = default;

  // A push for `step` from a worker whose own clock is `worker_clock`,
  // while the shard is at `global_step`.
  virtual PushVerdict JudgePush(int64_t step, int64_t worker_clock, int64_t global_step) const = 0;

  // Whether a worker at `clock` that needs parameters of at least
  // `min_step` may read them now.
  virtual bool MayPull(int64_t min_step, int64_t clock, const ShardClocks& clocks) const = 0;

  // The clock reported for a worker (registration, status).
  virtual int64_t ReportedClock(int64_t worker_clock, int64_t global_step) const = 0;

  // True: accepted gradients wait in the workers' slots and are averaged
  // into one update every GradientsPerUpdate of them, after which every
  // worker's clock is the global step. False: each accepted gradient is
  // applied at once and advances only its worker's clock.
  virtual bool lockstep() const = 0;

  // lockstep(): how many accepted gradients make one update while
  // `active_workers` workers have not finished. 1 otherwise.
  virtual int GradientsPerUpdate(int active_workers) const = 0;

  // How far a worker at `clock` runs ahead of the slowest active worker,
  // for the max_ssp_lead statistic; 0 where the mode does not bound it.
  virtual int64_t Lead(int64_t clock, int64_t min_active_clock) const = 0;
};

// The rule of `mode`. `num_workers` training replicas; `replicas_to_aggregate`
// (sync only) gradients per update, 0 meaning all of them.
std::unique_ptr<ConsistencyRule> MakeConsistencyRule(const ExchangeMode& mode, int num_workers,
                                                     int replicas_to_aggregate);

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_CONSISTENCY_RULE_H_
