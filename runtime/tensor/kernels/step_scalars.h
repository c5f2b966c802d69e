// The scalars of a training step that change from one step to the next,
// kept in device memory so that a step captured once (a CUDA graph) and
// replayed reads them there instead of having them baked into its kernels:
// the global step and its learning rate, Adam's bias-corrected coefficients,
// where the step's batch starts in the epoch's order, and how many training
// forwards have drawn dropout masks. AdvanceStepScalars moves them on by a
// step on the device; the learning rates and Adam's coefficients come from
// tables the host computed (ScheduledLr, AdamCoefficients: the functions
// LrSchedule::At and the optimizer use) and uploaded, so the device's
// values are the host's bit for bit (a device's cos, pow and fused
// multiply-adds would differ in the last bits).
// Host/device kernels (host_device.h); pure functions over POD structs.
#ifndef KUBETRAIN_RUNTIME_TENSOR_KERNELS_STEP_SCALARS_H_
#define KUBETRAIN_RUNTIME_TENSOR_KERNELS_STEP_SCALARS_H_

#include <math.h>

#include <cstddef>
#include <cstdint>

#include "runtime/tensor/kernels/host_device.h"

namespace kubetrain::kernels {

enum class LrKind : int32_t { kConstant = 0, kStep = 1, kCosine = 2 };

// A learning-rate schedule (runtime/optim/lr_schedule.h) as plain values.
struct LrPlan {
  LrKind kind = LrKind::kConstant;
  float base_lr = 0;
  int64_t warmup_steps = 0;
  int64_t step_size = 1;  // kStep
  float gamma = 1;        // kStep
  int64_t total_steps = 1;
  float min_lr = 0;  // kCosine
};

// The learning rate of global step `step` (0-based): a linear warm-up from
// base_lr / warmup_steps, then constant, stepped (times gamma every
// step_size steps) or cosine-decayed to min_lr at total_steps.
KT_HOST_DEVICE inline float ScheduledLr(const LrPlan& o, int64_t step) {
  if (step < 0) step = 0;
  if (step < o.warmup_steps) {
    return o.base_lr * static_cast<float>(step + 1) / static_cast<float>(o.warmup_steps);
  }
  if (o.kind == LrKind::kStep) {
    return o.base_lr * powf(o.gamma, static_cast<float>(step / o.step_size));
  }
  if (o.kind == LrKind::kCosine) {
    const int64_t span = o.total_steps - o.warmup_steps > 1 ? o.total_steps - o.warmup_steps : 1;
    double t = static_cast<double>(step - o.warmup_steps) / static_cast<double>(span);
    if (t > 1.0) t = 1.0;
    constexpr double kPi = 3.14159265358979323846;
    return static_cast<float>(o.min_lr + 0.5 * (o.base_lr - o.min_lr) * (1.0 + cos(kPi * t)));
  }
  return o.base_lr;
}

// Adam's step size and epsilon for its `t`-th update (1-based), with the
// bias corrections folded in (runtime/optim/optimizer.cc).
KT_HOST_DEVICE inline void AdamCoefficients(float lr, float beta1, float beta2, float epsilon,
                                            int64_t t, float* step, float* eps) {
  const double bc1 = 1.0 - pow(static_cast<double>(beta1), static_cast<double>(t));
  const double bc2 = 1.0 - pow(static_cast<double>(beta2), static_cast<double>(t));
  *step = static_cast<float>(lr * sqrt(bc2) / bc1);
  *eps = static_cast<float>(epsilon * sqrt(bc2));
}

// What the exchange's update follows (its schedule and optimizer).
struct UpdatePlan {
  LrPlan lr;
  bool adam = false;
  float beta1 = 0, beta2 = 0, epsilon = 0;
};

struct StepPlan {
  int64_t batch_rows = 0;  // the cursor's advance a step
  // Tables in the memory the scalars are in, of `table_steps` entries from
  // StepScalars::table_first: the learning rate of each step, and with Adam
  // {step, epsilon} of each step's update (null without Adam).
  const float* lr = nullptr;
  const float* adam = nullptr;
  int64_t table_steps = 0;
};

// In device memory; written whole by the host at a known point (the start,
// an epoch boundary, a new window of the tables), then advanced by the
// device.
struct StepScalars {
  int64_t step = 0;                       // the global step about to run
  int64_t optimizer_steps = 0;            // updates applied so far (Adam's t - 1)
  uint64_t forwards = 0;                  // training forwards so far (dropout's call number)
  int64_t cursor = 0;                     // the step's first row in the epoch's order
  int64_t table_first = 0;                // the step of the tables' first entry
  float lr = 0;                           // of `step`
  float adam_step = 0, adam_epsilon = 0;  // of update optimizer_steps + 1
};

static_assert(offsetof(StepScalars, adam_epsilon) == offsetof(StepScalars, adam_step) + 4,
              "AdamParams::coefficients_from reads {adam_step, adam_epsilon}");

// Moves `s` on by `steps` steps (0: look the step's scalars up only). A
// step outside the tables takes their last entry (the host refills them
// before that).
KT_HOST_DEVICE inline void AdvanceStepScalars(const StepPlan& plan, int64_t steps, StepScalars* s) {
  s->step += steps;
  s->optimizer_steps += steps;
  s->forwards += static_cast<uint64_t>(steps);
  s->cursor += steps * plan.batch_rows;
  int64_t i = s->step - s->table_first;
  if (i < 0) i = 0;
  if (i >= plan.table_steps) i = plan.table_steps - 1;
  if (i < 0) return;
  s->lr = plan.lr[i];
  if (plan.adam != nullptr) {
    s->adam_step = plan.adam[2 * i];
    s->adam_epsilon = plan.adam[2 * i + 1];
  }
}

// The host's tables for `steps` steps from `first_step`, whose first
// update is Adam's `first_update` (1-based): lr[i] and adam[2i], adam[2i+1].
inline void FillStepTables(const UpdatePlan& u, int64_t first_step, int64_t first_update,
                           int64_t steps, float* lr, float* adam) {
  for (int64_t i = 0; i < steps; ++i) {
    lr[i] = ScheduledLr(u.lr, first_step + i);
    if (u.adam && adam != nullptr) {
      AdamCoefficients(lr[i], u.beta1, u.beta2, u.epsilon, first_update + i, &adam[2 * i],
                       &adam[2 * i + 1]);
    }
  }
}

}  // namespace kubetrain::kernels

#endif  // KUBETRAIN_RUNTIME_TENSOR_KERNELS_STEP_SCALARS_H_
