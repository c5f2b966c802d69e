#include "runtime/exchange/ps/sync_rule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kubetrain::ps {

PushVerdict SyncRule::JudgePush(int64_t step, int64_t /*worker_clock*/, int64_t global_step) const {
  if (step > global_step) {
    return {PushVerdict::kFuture,
            absl::StrCat(" is from the future: global step is ", global_step)};
  }
  if (step < global_step) return {PushVerdict::kStale, ""};
  return {PushVerdict::kAccept, ""};
}

bool SyncRule::MayPull(int64_t min_step, int64_t /*clock*/, const ShardClocks& clocks) const {
  return clocks.global_step >= min_step;
}

int64_t SyncRule::ReportedClock(int64_t /*worker_clock*/, int64_t global_step) const {
  return global_step;
}

int SyncRule::GradientsPerUpdate(int active_workers) const {
  // Every active worker, or replicas_to_aggregate of them (backup workers):
  // the active count follows the job's membership (elastic workers).
  const int wanted = replicas_to_aggregate_ > 0 ? replicas_to_aggregate_ : active_workers;
  return std::max(1, std::min(wanted, active_workers));
}

}  // namespace kubetrain::ps
