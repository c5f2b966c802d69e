#include "runtime/exchange/ps/async_rule.h"

#include "absl/strings/str_cat.h"

namespace kubetrain::ps {

PushVerdict JudgePushByWorkerClock(int64_t step, int64_t worker_clock) {
  if (step > worker_clock) {
    return {PushVerdict::kFuture, absl::StrCat(" is from the future: its clock is ", worker_clock)};
  }
  if (step < worker_clock) return {PushVerdict::kStale, ""};
  return {PushVerdict::kAccept, ""};
}

PushVerdict AsyncRule::JudgePush(int64_t step, int64_t worker_clock,
                                 int64_t /*global_step*/) const {
  return JudgePushByWorkerClock(step, worker_clock);
}

}  // namespace kubetrain::ps
