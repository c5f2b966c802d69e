// SyncRule: one averaged update per global step. A push must be for the
// current global step (older ones, e.g. a backup worker's, are dropped as
// stale); every `replicas_to_aggregate` accepted gradients (0: all
// active workers, never more than are active: the count follows the
// job's membership) make one update; a pull
// waits until the global step reaches the step it asks for.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_SYNC_RULE_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_SYNC_RULE_H_

#include "runtime/exchange/ps/consistency_rule.h"

namespace kubetrain::ps {

class SyncRule : public ConsistencyRule {
 public:
  // `num_workers` (the cluster spec's) no longer bounds a step: the
  // active workers do (GradientsPerUpdate).
  SyncRule(int /*num_workers*/, int replicas_to_aggregate)
      : replicas_to_aggregate_(replicas_to_aggregate) {}

  PushVerdict JudgePush(int64_t step, int64_t worker_clock, int64_t global_step) const override;
  bool MayPull(int64_t min_step, int64_t clock, const ShardClocks& clocks) const override;
  int64_t ReportedClock(int64_t worker_clock, int64_t global_step) const override;
  bool lockstep() const override { return true; }
  int GradientsPerUpdate(int active_workers) const override;
  int64_t Lead(int64_t, int64_t) const override { return 0; }

 private:
  const int replicas_to_aggregate_;
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_SYNC_RULE_H_
