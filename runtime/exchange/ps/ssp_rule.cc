#include "runtime/exchange/ps/ssp_rule.h"

#include "runtime/exchange/ps/async_rule.h"

namespace kubetrain::ps {

PushVerdict SspRule::JudgePush(int64_t step, int64_t worker_clock, int64_t /*global_step*/) const {
  return JudgePushByWorkerClock(step, worker_clock);
}

bool SspRule::MayPull(int64_t /*min_step*/, int64_t clock, const ShardClocks& clocks) const {
  return clock - clocks.min_active_clock <= bound_;
}

}  // namespace kubetrain::ps
