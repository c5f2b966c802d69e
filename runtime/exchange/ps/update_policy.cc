#include "runtime/exchange/ps/update_policy.h"

#include "runtime/exchange/ps/immediate_apply.h"
#include "runtime/exchange/ps/sync_aggregator.h"

namespace kubetrain::ps {

std::unique_ptr<UpdatePolicy> MakeUpdatePolicy(const UpdatePolicyOptions& options,
                                               const ConsistencyRule& rule,
                                               metrics::RuntimeMetrics* metrics) {
  switch (options.mode.kind) {
    case ExchangeMode::kSync: {
      // Rounds need every worker's chunk: with backup workers a step
      // takes whichever whole gradients come first.
      const bool every_worker = options.replicas_to_aggregate <= 0 ||
                                options.replicas_to_aggregate >= options.num_workers;
      return std::make_unique<SyncAggregator>(rule, options.num_workers,
                                              options.pipeline && every_worker);
    }
    case ExchangeMode::kAsync:
    case ExchangeMode::kSsp:
      break;
  }
  return std::make_unique<ImmediateApply>(metrics);
}

}  // namespace kubetrain::ps
