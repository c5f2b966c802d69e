#include "runtime/exchange/ps/consistency_rule.h"

#include "runtime/exchange/ps/async_rule.h"
#include "runtime/exchange/ps/ssp_rule.h"
#include "runtime/exchange/ps/sync_rule.h"

namespace kubetrain::ps {

std::unique_ptr<ConsistencyRule> MakeConsistencyRule(const ExchangeMode& mode, int num_workers,
                                                     int replicas_to_aggregate) {
  switch (mode.kind) {
    case ExchangeMode::kSync:
      return std::make_unique<SyncRule>(num_workers, replicas_to_aggregate);
    case ExchangeMode::kSsp:
      return std::make_unique<SspRule>(mode.ssp_bound);
    case ExchangeMode::kAsync:
      break;
  }
  return std::make_unique<AsyncRule>();
}

}  // namespace kubetrain::ps
