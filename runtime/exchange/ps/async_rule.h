// AsyncRule: every gradient is applied as it arrives. A push must be for
// the pushing worker's own clock (older ones, a restarted worker's repeats,
// are dropped as stale); a pull never waits.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_ASYNC_RULE_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_ASYNC_RULE_H_

#include "runtime/exchange/ps/consistency_rule.h"

namespace kubetrain::ps {

class AsyncRule : public ConsistencyRule {
 public:
  PushVerdict JudgePush(int64_t step, int64_t worker_clock, int64_t global_step) const override;
  bool MayPull(int64_t, int64_t, const ShardClocks&) const override { return true; }
  int64_t ReportedClock(int64_t worker_clock, int64_t) const override { return worker_clock; }
  bool lockstep() const override { return false; }
  int GradientsPerUpdate(int) const override { return 1; }
  int64_t Lead(int64_t, int64_t) const override { return 0; }
};

// The push rule shared by async and ssp: the step is the worker's clock.
PushVerdict JudgePushByWorkerClock(int64_t step, int64_t worker_clock);

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_ASYNC_RULE_H_
