// Learning-rate schedules as a pure function of the global step.
// Value type; thread-safe for concurrent reads.
#ifndef KUBETRAIN_RUNTIME_OPTIM_LR_SCHEDULE_H_
#define KUBETRAIN_RUNTIME_OPTIM_LR_SCHEDULE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/tensor/kernels/step_scalars.h"

namespace kubetrain::optim {

struct LrScheduleOptions {
  std::string kind = "constant";  // constant | step | cosine
  float base_lr = 0.01f;
  int64_t warmup_steps = 0;  // linear ramp from 0 to base_lr first
  int64_t step_size = 0;     // step: multiply by gamma every step_size steps
  float gamma = 0.1f;        // step
  int64_t total_steps = 0;   // cosine: decays to min_lr at total_steps
  float min_lr = 0.0f;       // cosine floor
};

class LrSchedule {
 public:
  static absl::StatusOr<LrSchedule> Create(const LrScheduleOptions& options);

  // Learning rate for global step `step` (0-based): kernels::ScheduledLr,
  // the function a device computes it with too.
  float At(int64_t step) const;
  kernels::LrPlan plan() const;
  const LrScheduleOptions& options() const { return o_; }

 private:
  explicit LrSchedule(const LrScheduleOptions& o) : o_(o) {}
  LrScheduleOptions o_;
};

}  // namespace kubetrain::optim

#endif  // KUBETRAIN_RUNTIME_OPTIM_LR_SCHEDULE_H_
