#include "runtime/nn/activation.h"

#include <cstring>

#include "runtime/nn/kernels/relu.h"
#include "runtime/tensor/parallel_for.h"

namespace kubetrain::nn {
namespace {

// Elements per ParallelFor chunk at least: below this a second thread costs
// more than it saves.
constexpr int64_t kElementGrain = 1 << 15;

}  // namespace

void ReLU::Forward(const TensorView& in, const TensorView& out, bool training) {
  const float* x = in.data();
  float* y = out.data();
  ParallelFor(in.size(), kElementGrain,
              [&](int, int64_t begin, int64_t end) { kernels::ReluForward(begin, end, x, y); });
}

void ReLU::Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                    const TensorView* grad_in) {
  if (grad_in == nullptr) return;
  const float* x = in.data();
  const float* gy = grad_out.data();
  float* gx = grad_in->data();
  ParallelFor(in.size(), kElementGrain, [&](int, int64_t begin, int64_t end) {
    kernels::ReluBackward(begin, end, x, gy, gx);
  });
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
