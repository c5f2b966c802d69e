#include "runtime/nn/activation.h"

#include <algorithm>
#include <cstring>

namespace kubetrain::nn {

void ReLU::Forward(const TensorView& in, const TensorView& out, bool training) {
  const int64_t n = in.size();
  const float* x = in.data();
  float* y = out.data();
  for (int64_t i = 0; i < n; ++i) y[i] = std::max(x[i], 0.0f);
}

void ReLU::Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                    const TensorView* grad_in) {
  if (grad_in == nullptr) return;
  const int64_t n = in.size();
  const float* x = in.data();
  const float* gy = grad_out.data();
  float* gx = grad_in->data();
  for (int64_t i = 0; i < n; ++i) gx[i] = x[i] > 0.0f ? gy[i] : 0.0f;
}

absl::StatusOr<Shape> Flatten::Build(const Shape& input_shape) {
  return Shape{NumElements(input_shape)};
}

void Flatten::Forward(const TensorView& in, const TensorView& out, bool training) {
  std::memcpy(out.data(), in.data(), static_cast<size_t>(in.size()) * sizeof(float));
}

void Flatten::Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                       const TensorView* grad_in) {
  if (grad_in == nullptr) return;
  std::memcpy(grad_in->data(), grad_out.data(),
              static_cast<size_t>(grad_out.size()) * sizeof(float));
}

}  // namespace kubetrain::nn
