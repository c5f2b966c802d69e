#include "runtime/optim/optimizer.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "runtime/tensor/kernels/cpu_clones.h"
#include "runtime/tensor/kernels/optimizer_update.h"

namespace kubetrain::optim {
namespace {

// A state buffer of `size` floats, zeroed: host memory, or the device's.
class StateBuffer {
 public:
  absl::Status Allocate(ComputeDevice* device, size_t size) {
    if (device == nullptr) {
      host_.EnsureSize(size);
      data_ = host_.data();
    } else {
      absl::StatusOr<DeviceBuffer> b = device->Allocate(size * sizeof(float));
      if (!b.ok()) return b.status();
      device_ = *std::move(b);
      data_ = device_.data();
      device->Fill(data_, static_cast<int64_t>(size), 0.0f);
    }
    size_ = size;
    return absl::OkStatus();
  }
  float* data() { return data_; }
  std::span<float> span() { return {data_, size_}; }

 private:
  AlignedBuffer host_;
  DeviceBuffer device_;
  float* data_ = nullptr;
  size_t size_ = 0;
};

// The host's updates, vectorised for the CPU's best ISA (the kernels' fused
// multiply-adds give every clone the same bits).
KT_CPU_CLONES void HostSgd(const kernels::SgdParams& o, int64_t n, float* p, const float* g,
                           float* v) {
  kernels::SgdUpdate(o, 0, n, p, g, v);
}

KT_CPU_CLONES void HostAdam(const kernels::AdamParams& o, int64_t n, float* p, const float* g,
                            float* m, float* v) {
  kernels::AdamUpdate(o, 0, n, p, g, m, v);
}

// Calls fill for each block of kApplyBlock values of [0, size), into a
// buffer that stays in cache, then update(begin, count, block).
template <typename Update>
void ForEachBlock(size_t size, Optimizer::GradientBlocks fill, Update update) {
  alignas(64) float block[Optimizer::kApplyBlock];
  for (size_t b = 0; b < size; b += Optimizer::kApplyBlock) {
    const size_t e = std::min(size, b + Optimizer::kApplyBlock);
    fill(b, e, block);
    update(b, static_cast<int64_t>(e - b), block);
  }
}

class Sgd final : public Optimizer {
 public:
  Sgd(const OptimizerOptions& o, size_t size, ComputeDevice* device)
      : o_(o), size_(size), device_(device) {}

  absl::Status Init() {
    if (o_.momentum == 0.0f) return absl::OkStatus();
    return velocity_.Allocate(device_, size_);
  }

  void Apply(std::span<float> params, std::span<const float> grads, float lr,
             float grad_scale) override {
    KT_CHECK_EQ(params.size(), size_);
    KT_CHECK_EQ(grads.size(), size_);
    kernels::SgdParams p = Coefficients(lr);
    p.grad_scale = grad_scale;
    if (device_ != nullptr) {
      device_->SgdUpdate(p, params.data(), grads.data(), velocity_.data(),
                         static_cast<int64_t>(size_));
    } else {
      HostSgd(p, static_cast<int64_t>(size_), params.data(), grads.data(), velocity_.data());
    }
    ++steps_;
  }

  void ApplyBlocks(std::span<float> params, GradientBlocks fill, float lr) override {
    KT_CHECK_EQ(params.size(), size_);
    ApplyPart(params, 0, fill, lr);
    ++steps_;
  }

  void ApplyPart(std::span<float> params, size_t offset, GradientBlocks fill, float lr) override {
    KT_CHECK_GE(size_, offset + params.size());
    KT_CHECK(device_ == nullptr);
    const kernels::SgdParams p = Coefficients(lr);
    float* v = velocity_.data();
    ForEachBlock(params.size(), fill, [&](size_t b, int64_t n, const float* g) {
      HostSgd(p, n, params.data() + b, g, v == nullptr ? nullptr : v + offset + b);
    });
  }

  std::vector<std::pair<std::string, std::span<float>>> State() override {
    if (o_.momentum == 0.0f) return {};
    return {{"velocity", velocity_.span()}};
  }
  int64_t steps() const override { return steps_; }
  void set_steps(int64_t s) override { steps_ = s; }
  size_t size() const override { return size_; }
  const OptimizerOptions& options() const override { return o_; }
  void UseDeviceScalars(const kernels::StepScalars* s) override { scalars_ = s; }

 private:
  kernels::SgdParams Coefficients(float lr) const {
    return {.lr = lr,
            .weight_decay = o_.weight_decay,
            .momentum = o_.momentum,
            .nesterov = o_.nesterov,
            .lr_from = scalars_ != nullptr ? &scalars_->lr : nullptr};
  }

  OptimizerOptions o_;
  size_t size_;
  ComputeDevice* device_;
  StateBuffer velocity_;
  int64_t steps_ = 0;
  const kernels::StepScalars* scalars_ = nullptr;
};

class Adam final : public Optimizer {
 public:
  Adam(const OptimizerOptions& o, size_t size, ComputeDevice* device)
      : o_(o), size_(size), device_(device) {}

  absl::Status Init() {
    if (absl::Status s = m_.Allocate(device_, size_); !s.ok()) return s;
    return v_.Allocate(device_, size_);
  }

  void Apply(std::span<float> params, std::span<const float> grads, float lr,
             float grad_scale) override {
    KT_CHECK_EQ(params.size(), size_);
    KT_CHECK_EQ(grads.size(), size_);
    kernels::AdamParams p = NextStep(lr);
    p.grad_scale = grad_scale;
    if (device_ != nullptr) {
      device_->AdamUpdate(p, params.data(), grads.data(), m_.data(), v_.data(),
                          static_cast<int64_t>(size_));
    } else {
      HostAdam(p, static_cast<int64_t>(size_), params.data(), grads.data(), m_.data(), v_.data());
    }
  }

  void ApplyBlocks(std::span<float> params, GradientBlocks fill, float lr) override {
    KT_CHECK_EQ(params.size(), size_);
    ApplyPart(params, 0, fill, lr);  // with step steps_ + 1's coefficients, as NextStep
    ++steps_;
  }

  void ApplyPart(std::span<float> params, size_t offset, GradientBlocks fill, float lr) override {
    KT_CHECK_GE(size_, offset + params.size());
    KT_CHECK(device_ == nullptr);
    const kernels::AdamParams p = Coefficients(lr, steps_ + 1);
    float* m = m_.data() + offset;
    float* v = v_.data() + offset;
    ForEachBlock(params.size(), fill, [&](size_t b, int64_t n, const float* g) {
      HostAdam(p, n, params.data() + b, g, m + b, v + b);
    });
  }

  std::vector<std::pair<std::string, std::span<float>>> State() override {
    return {{"m", m_.span()}, {"v", v_.span()}};
  }
  int64_t steps() const override { return steps_; }
  void set_steps(int64_t s) override { steps_ = s; }
  size_t size() const override { return size_; }
  const OptimizerOptions& options() const override { return o_; }
  void UseDeviceScalars(const kernels::StepScalars* s) override { scalars_ = s; }

 private:
  // Counts the step and returns its bias-corrected coefficients.
  kernels::AdamParams NextStep(float lr) {
    ++steps_;
    return Coefficients(lr, steps_);
  }
  // The bias-corrected coefficients of step `step` (1-based).
  kernels::AdamParams Coefficients(float lr, int64_t step) const {
    // epsilon is applied to the bias-corrected second moment, as in Kingma & Ba.
    kernels::AdamParams p{.beta1 = o_.beta1, .beta2 = o_.beta2, .weight_decay = o_.weight_decay};
    kernels::AdamCoefficients(lr, o_.beta1, o_.beta2, o_.epsilon, step, &p.step, &p.epsilon);
    if (scalars_ != nullptr) p.coefficients_from = &scalars_->adam_step;
    return p;
  }

  OptimizerOptions o_;
  size_t size_;
  ComputeDevice* device_;
  StateBuffer m_, v_;
  int64_t steps_ = 0;
  const kernels::StepScalars* scalars_ = nullptr;
};

}  // namespace

kernels::UpdatePlan MakeUpdatePlan(const kernels::LrPlan& schedule, const OptimizerOptions& o) {
  kernels::UpdatePlan p;
  p.lr = schedule;
  p.adam = o.kind == "adam";
  p.beta1 = o.beta1;
  p.beta2 = o.beta2;
  p.epsilon = o.epsilon;
  return p;
}

absl::Status ValidateOptimizerOptions(const OptimizerOptions& o) {
  if (o.kind != "sgd" && o.kind != "adam") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown optimizer '", o.kind, "' (known: sgd, adam)"));
  }
  if (!(o.momentum >= 0.0f && o.momentum < 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("momentum must be in [0, 1), got ", o.momentum));
  }
  if (!(o.weight_decay >= 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight decay must be >= 0, got ", o.weight_decay));
  }
  if (!(o.beta1 >= 0.0f && o.beta1 < 1.0f && o.beta2 >= 0.0f && o.beta2 < 1.0f)) {
    return absl::InvalidArgumentError("adam betas must be in [0, 1)");
  }
  if (!(o.epsilon > 0.0f)) return absl::InvalidArgumentError("adam epsilon must be > 0");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(const OptimizerOptions& options,
                                                         size_t size, ComputeDevice* device) {
  if (absl::Status s = ValidateOptimizerOptions(options); !s.ok()) return s;
  if (options.kind == "adam") {
    auto adam = std::make_unique<Adam>(options, size, device);
    if (absl::Status s = adam->Init(); !s.ok()) return s;
    return adam;
  }
  auto sgd = std::make_unique<Sgd>(options, size, device);
  if (absl::Status s = sgd->Init(); !s.ok()) return s;
  return sgd;
}

}  // namespace kubetrain::optim
