// ImmediateApply: the update policy of async and ssp. Each gradient the
// rule accepts is applied at once as one update; nothing waits, so a
// worker never holds a step back. How far workers may drift apart is the
// rule's (ssp_rule.h bounds pulls), not this policy's. Records each
// gradient's staleness: the updates applied since its worker pulled the
// parameters it was computed from.
//
// Not thread-safe (update_policy.h).
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_IMMEDIATE_APPLY_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_IMMEDIATE_APPLY_H_

#include <cstdint>
#include <span>

#include "runtime/exchange/ps/update_policy.h"
#include "runtime/metrics/runtime_metrics.h"

namespace kubetrain::ps {

class ImmediateApply final : public UpdatePolicy {
 public:
  // `metrics` (borrowed, may be null) gets each gradient's staleness.
  explicit ImmediateApply(metrics::RuntimeMetrics* metrics) : metrics_(metrics) {}

  bool Push(ShardParams& params, int worker, std::span<const float> gradient,
            int64_t pulled_step) override;
  bool Holds(int /*worker*/) const override { return false; }
  bool WorkerDone(ShardParams& /*params*/, int /*worker*/) override { return false; }

 private:
  metrics::RuntimeMetrics* const metrics_;
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_IMMEDIATE_APPLY_H_
