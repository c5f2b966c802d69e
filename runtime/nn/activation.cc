#include "runtime/nn/activation.h"

namespace kubetrain::nn {

void ReLU::Forward(const TensorView& in, const TensorView& out, bool training) {
  device().ReluForward(in.data(), out.data(), in.size());
}

void ReLU::Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                    const TensorView* grad_in) {
  if (grad_in == nullptr) return;
  device().ReluBackward(in.data(), grad_out.data(), grad_in->data(), in.size());
}

absl::StatusOr<Shape> Flatten::Build(const Shape& input_shape) {
  return Shape{NumElements(input_shape)};
}

void Flatten::Forward(const TensorView& in, const TensorView& out, bool training) {
  device().Copy(in.data(), out.data(), in.size());
}

void Flatten::Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                       const TensorView* grad_in) {
  if (grad_in == nullptr) return;
  device().Copy(grad_out.data(), grad_in->data(), grad_out.size());
}

}  // namespace kubetrain::nn
