#include "runtime/train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kubetrain::train {

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

float LrSchedule::At(int64_t step) const {
  step = std::max<int64_t>(step, 0);
  if (step < o_.warmup_steps) {
    return o_.base_lr * static_cast<float>(step + 1) / static_cast<float>(o_.warmup_steps);
  }
  if (o_.kind == "step") {
    return o_.base_lr * std::pow(o_.gamma, static_cast<float>(step / o_.step_size));
  }
  if (o_.kind == "cosine") {
    const int64_t span = std::max<int64_t>(o_.total_steps - o_.warmup_steps, 1);
    const double t = std::min(1.0, static_cast<double>(step - o_.warmup_steps) / span);
    return static_cast<float>(o_.min_lr + 0.5 * (o_.base_lr - o_.min_lr) *
                                              (1.0 + std::cos(std::numbers::pi * t)));
  }
  return o_.base_lr;
}

}  // namespace kubetrain::train
