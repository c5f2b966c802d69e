// Shape-preserving element-wise layers: ReLU and Flatten.
// Not thread-safe (trivially stateless, but follows the Layer contract).
#ifndef KUBETRAIN_RUNTIME_NN_ACTIVATION_H_
#define KUBETRAIN_RUNTIME_NN_ACTIVATION_H_

#include "runtime/nn/layer.h"

namespace kubetrain::nn {

// out = max(0, in).
class ReLU : public Layer {
 public:
  std::string kind() const override { return "relu"; }
  absl::StatusOr<Shape> Build(const Shape& input_shape) override { return input_shape; }
  void Forward(const TensorView& in, const TensorView& out, bool training) override;
  void Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                const TensorView* grad_in) override;
};

// Collapses {h, w, c} (or any shape) to {h*w*c}.
class Flatten : public Layer {
 public:
  std::string kind() const override { return "flatten"; }
  absl::StatusOr<Shape> Build(const Shape& input_shape) override;
  void Forward(const TensorView& in, const TensorView& out, bool training) override;
  void Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                const TensorView* grad_in) override;
};

}  // namespace kubetrain::nn

#endif  // KUBETRAIN_RUNTIME_NN_ACTIVATION_H_
