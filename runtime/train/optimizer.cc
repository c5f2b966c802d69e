#include "runtime/train/optimizer.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kubetrain/check.h"

namespace kubetrain::train {
namespace {

class Sgd final : public Optimizer {
 public:
  Sgd(const OptimizerOptions& o, size_t size) : o_(o), size_(size) {
    if (o_.momentum != 0.0f) velocity_.EnsureSize(size);
  }

  void Apply(std::span<float> params, std::span<const float> grads, float lr) override {
    KT_CHECK_EQ(params.size(), size_);
    KT_CHECK_EQ(grads.size(), size_);
    float* p = params.data();
    const float* g = grads.data();
    const float wd = o_.weight_decay, mu = o_.momentum;
    if (mu == 0.0f) {
      for (size_t i = 0; i < size_; ++i) p[i] -= lr * (g[i] + wd * p[i]);
    } else {
      float* v = velocity_.data();
      for (size_t i = 0; i < size_; ++i) {
        const float d = g[i] + wd * p[i];
        v[i] = mu * v[i] + d;
        p[i] -= lr * (o_.nesterov ? d + mu * v[i] : v[i]);
      }
    }
    ++steps_;
  }

  std::vector<std::pair<std::string, std::span<float>>> State() override {
    if (o_.momentum == 0.0f) return {};
    return {{"velocity", velocity_.span()}};
  }
  int64_t steps() const override { return steps_; }
  void set_steps(int64_t s) override { steps_ = s; }
  size_t size() const override { return size_; }

 private:
  OptimizerOptions o_;
  size_t size_;
  AlignedBuffer velocity_;
  int64_t steps_ = 0;
};

class Adam final : public Optimizer {
 public:
  Adam(const OptimizerOptions& o, size_t size) : o_(o), size_(size), m_(size), v_(size) {}

  void Apply(std::span<float> params, std::span<const float> grads, float lr) override {
    KT_CHECK_EQ(params.size(), size_);
    KT_CHECK_EQ(grads.size(), size_);
    ++steps_;
    const double bc1 = 1.0 - std::pow(static_cast<double>(o_.beta1), steps_);
    const double bc2 = 1.0 - std::pow(static_cast<double>(o_.beta2), steps_);
    const float step = static_cast<float>(lr * std::sqrt(bc2) / bc1);
    const float b1 = o_.beta1, b2 = o_.beta2, wd = o_.weight_decay;
    // epsilon is applied to the bias-corrected second moment, as in Kingma & Ba.
    const float eps = static_cast<float>(o_.epsilon * std::sqrt(bc2));
    float* p = params.data();
    const float* g = grads.data();
    float* m = m_.data();
    float* v = v_.data();
    for (size_t i = 0; i < size_; ++i) {
      const float d = g[i] + wd * p[i];
      m[i] = b1 * m[i] + (1.0f - b1) * d;
      v[i] = b2 * v[i] + (1.0f - b2) * d * d;
      p[i] -= step * m[i] / (std::sqrt(v[i]) + eps);
    }
  }

  std::vector<std::pair<std::string, std::span<float>>> State() override {
    return {{"m", m_.span()}, {"v", v_.span()}};
  }
  int64_t steps() const override { return steps_; }
  void set_steps(int64_t s) override { steps_ = s; }
  size_t size() const override { return size_; }

 private:
  OptimizerOptions o_;
  size_t size_;
  AlignedBuffer m_, v_;
  int64_t steps_ = 0;
};

}  // namespace

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
                                                         size_t size) {
  if (absl::Status s = ValidateOptimizerOptions(options); !s.ok()) return s;
  if (options.kind == "adam") return std::make_unique<Adam>(options, size);
  return std::make_unique<Sgd>(options, size);
}

}  // namespace kubetrain::train
