// Optimizers over a contiguous range of the flat parameter vector. The same
// code runs in a single process (whole vector) and on a parameter-server
// shard (its own range), so it never sees layers. The update is one fused
// host/device kernel (runtime/tensor/kernels/optimizer_update.h); with a
// ComputeDevice, parameters, gradients and state live in its memory and the
// update runs there.
// Not thread-safe: one Optimizer per range, driven by one thread at a time.
#ifndef KUBETRAIN_RUNTIME_OPTIM_OPTIMIZER_H_
#define KUBETRAIN_RUNTIME_OPTIM_OPTIMIZER_H_

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "runtime/tensor/aligned_buffer.h"
#include "runtime/tensor/compute_device.h"
#include "runtime/tensor/kernels/step_scalars.h"

namespace kubetrain::optim {

struct OptimizerOptions {
  std::string kind = "sgd";   // sgd | adam
  float momentum = 0.9f;      // sgd; 0 disables the velocity buffer
  bool nesterov = false;      // sgd
  float weight_decay = 0.0f;  // L2, added to the gradient
  float beta1 = 0.9f;         // adam
  float beta2 = 0.999f;       // adam
  float epsilon = 1e-8f;      // adam
};

absl::Status ValidateOptimizerOptions(const OptimizerOptions& o);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // params -= update(grads * grad_scale) with learning rate `lr`; sizes must
  // equal size(). The scale rides in the update's one pass (an allreduce
  // sum's 1 / world): the same bits as scaling the gradient first.
  virtual void Apply(std::span<float> params, std::span<const float> grads, float lr,
                     float grad_scale) = 0;
  void Apply(std::span<float> params, std::span<const float> grads, float lr) {
    Apply(params, grads, lr, 1.0f);
  }
  // Writes grads[begin, end) into `out` (end - begin <= kApplyBlock floats).
  using GradientBlocks = absl::FunctionRef<void(size_t begin, size_t end, float* out)>;
  static constexpr size_t kApplyBlock = 4096;  // 16 KiB: stays in L1/L2 cache
  // As Apply, with the gradient made block by block, in order, by `fill`
  // just before the update reads that block: a parameter server sums its
  // workers' gradients there, so the sum never goes through memory whole.
  // Gives the same bits as Apply on the gradient `fill` describes. Host
  // memory only: an optimizer made with a device must not be called so.
  virtual void ApplyBlocks(std::span<float> params, GradientBlocks fill, float lr) = 0;
  // One step in parts, for a parameter server that applies each chunk of a
  // sync step as soon as every worker's gradient for it has arrived:
  // updates the parameters [offset, offset + params.size()) of this range
  // (`params` is that part; `fill` is called with begin/end relative to
  // `offset`) and their state, as step steps() + 1 would, without counting
  // the step. Parts covering the range once, then set_steps(steps() + 1),
  // give ApplyBlocks' bits. Host memory only.
  virtual void ApplyPart(std::span<float> params, size_t offset, GradientBlocks fill, float lr) = 0;
  // Named state buffers (velocity, moments) for checkpoints, in the
  // memory of the optimizer's device (host memory without one).
  virtual std::vector<std::pair<std::string, std::span<float>>> State() = 0;
  // Number of Apply calls so far (Adam's bias correction uses it).
  virtual int64_t steps() const = 0;
  virtual void set_steps(int64_t steps) = 0;
  virtual size_t size() const = 0;
  virtual const OptimizerOptions& options() const = 0;
  // From now on Apply takes its learning rate (and Adam its coefficients)
  // from `scalars`, in the memory of the optimizer's device, which the
  // device advances step by step (a captured step: step_scalars.h); Apply's
  // lr argument is then unused. nullptr goes back to the argument.
  virtual void UseDeviceScalars(const kernels::StepScalars* scalars) = 0;
};

// The update an optimizer with `options` makes under `schedule`, as the
// device recomputes it (kernels::AdvanceStepScalars).
kernels::UpdatePlan MakeUpdatePlan(const kernels::LrPlan& schedule,
                                   const OptimizerOptions& options);

// An optimizer for `size` parameters in host memory, or, with a device
// (borrowed; must outlive it), in that device's memory.
absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(const OptimizerOptions& options,
                                                         size_t size,
                                                         ComputeDevice* device = nullptr);

}  // namespace kubetrain::optim

#endif  // KUBETRAIN_RUNTIME_OPTIM_OPTIMIZER_H_
