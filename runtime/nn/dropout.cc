#include "runtime/nn/dropout.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kubetrain::nn {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

absl::StatusOr<Shape> Dropout::Build(const Shape& input_shape) {
  if (!(rate_ >= 0.0f && rate_ < 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("rate must be in [0, 1), got ", rate_));
  }
  return input_shape;
}

void Dropout::Forward(const TensorView& in, const TensorView& out, bool training) {
  const int64_t n = in.size();
  last_training_ = training && rate_ > 0.0f;
  if (!last_training_) {
    std::memcpy(out.data(), in.data(), static_cast<size_t>(n) * sizeof(float));
    return;
  }
  mask_.resize(static_cast<size_t>(n));
  const float scale = 1.0f / (1.0f - rate_);
  const uint64_t base = SplitMix64(seed_ ^ SplitMix64(calls_++));
  // Keep when the top 24 bits, as a fraction of 2^24, are >= rate.
  const uint64_t threshold = static_cast<uint64_t>(static_cast<double>(rate_) * (1 << 24));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = SplitMix64(base + static_cast<uint64_t>(i)) >> 40;
    mask_[i] = r >= threshold ? scale : 0.0f;
    out[i] = in[i] * mask_[i];
  }
}

void Dropout::Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                       const TensorView* grad_in) {
  if (grad_in == nullptr) return;
  const int64_t n = grad_out.size();
  if (!last_training_) {
    std::memcpy(grad_in->data(), grad_out.data(), static_cast<size_t>(n) * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < n; ++i) (*grad_in)[i] = grad_out[i] * mask_[i];
}

std::string Dropout::Describe() const { return absl::StrCat("dropout(rate=", rate_, ")"); }

}  // namespace kubetrain::nn
