// SspRule (stale synchronous parallel, bound s): pushes as in async (the
// step is the worker's own clock, each gradient applied at once), but a
// worker's pull waits while its clock is more than s ahead of the slowest
// worker still training.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_SSP_RULE_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_SSP_RULE_H_

#include "runtime/exchange/ps/consistency_rule.h"

namespace kubetrain::ps {

class SspRule : public ConsistencyRule {
 public:
  explicit SspRule(int bound) : bound_(bound) {}

  PushVerdict JudgePush(int64_t step, int64_t worker_clock, int64_t global_step) const override;
  bool MayPull(int64_t min_step, int64_t clock, const ShardClocks& clocks) const override;
  int64_t ReportedClock(int64_t worker_clock, int64_t) const override { return worker_clock; }
  bool lockstep() const override { return false; }
  int GradientsPerUpdate(int) const override { return 1; }
  int64_t Lead(int64_t clock, int64_t min_active_clock) const override {
    return clock - min_active_clock;
  }

 private:
  const int bound_;
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_SSP_RULE_H_
