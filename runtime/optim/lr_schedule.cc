#include "runtime/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kubetrain::optim {

absl::StatusOr<LrSchedule> LrSchedule::Create(const LrScheduleOptions& o) {
  if (!(o.base_lr > 0.0f) || !std::isfinite(o.base_lr)) {
    return absl::InvalidArgumentError(absl::StrCat("learning rate must be > 0, got ", o.base_lr));
  }
  if (o.warmup_steps < 0) return absl::InvalidArgumentError("warmup steps must be >= 0");
  if (o.kind == "constant") return LrSchedule(o);
  if (o.kind == "step") {
    if (o.step_size <= 0) {
      return absl::InvalidArgumentError("step schedule needs a step size > 0 (--lr-step-size)");
    }
    if (!(o.gamma > 0.0f)) return absl::InvalidArgumentError("step schedule needs gamma > 0");
    return LrSchedule(o);
  }
  if (o.kind == "cosine") {
    if (o.total_steps <= 0)
      return absl::InvalidArgumentError("cosine schedule needs total steps > 0");
    if (!(o.min_lr >= 0.0f && o.min_lr <= o.base_lr)) {
      return absl::InvalidArgumentError("cosine min_lr must be in [0, base_lr]");
    }
    return LrSchedule(o);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown learning-rate schedule '", o.kind,
                                                 "' (known: constant, step, cosine)"));
}

kernels::LrPlan LrSchedule::plan() const {
  kernels::LrPlan p;
  p.kind = o_.kind == "step"     ? kernels::LrKind::kStep
           : o_.kind == "cosine" ? kernels::LrKind::kCosine
                                 : kernels::LrKind::kConstant;
  p.base_lr = o_.base_lr;
  p.warmup_steps = o_.warmup_steps;
  p.step_size = std::max<int64_t>(o_.step_size, 1);
  p.gamma = o_.gamma;
  p.total_steps = o_.total_steps;
  p.min_lr = o_.min_lr;
  return p;
}

float LrSchedule::At(int64_t step) const { return kernels::ScheduledLr(plan(), step); }

}  // namespace kubetrain::optim
