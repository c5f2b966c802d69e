#include "runtime/exchange/ps/immediate_apply.h"

namespace kubetrain::ps {

bool ImmediateApply::Push(ShardParams& params, int /*worker*/, std::span<const float> gradient,
                          int64_t pulled_step) {
  if (metrics_ != nullptr) metrics_->RecordStaleness(params.global_step() - pulled_step);
  params.Apply(gradient);
  return true;
}

}  // namespace kubetrain::ps
