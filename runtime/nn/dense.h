// Dense (fully connected): out = in * W^T + b, W is {units, inputs}.
// Computes through its ComputeDevice (layer.h). Not thread-safe.
#ifndef KUBETRAIN_RUNTIME_NN_DENSE_H_
#define KUBETRAIN_RUNTIME_NN_DENSE_H_

#include "runtime/nn/layer.h"

namespace kubetrain::nn {

class Dense : public Layer {
 public:
  explicit Dense(int64_t units) : units_(units) {}

  std::string kind() const override { return "dense"; }
  absl::StatusOr<Shape> Build(const Shape& input_shape) override;
  void DeclareParams(FlatParameters& flat, const std::string& prefix) override;
  void BindParams(FlatParameters& flat) override;
  void InitParams(std::mt19937_64& rng) override;
  int64_t NumParams() const override { return units_ * inputs_ + units_; }
  void Forward(const TensorView& in, const TensorView& out, bool training) override;
  void Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                const TensorView* grad_in) override;
  int64_t ForwardFlops(int64_t batch) const override;
  int64_t BackwardFlops(int64_t batch) const override;
  int64_t InputGradFlops(int64_t batch) const override { return 2 * batch * units_ * inputs_; }
  absl::Status Reserve(int64_t batch) override;
  int64_t ScratchBytes(int64_t batch) const override;
  bool FuseRelu() override {
    relu_ = true;
    return true;
  }
  std::string Describe() const override;

 private:
  int64_t units_;
  int64_t inputs_ = 0;
  int w_index_ = -1, b_index_ = -1;
  TensorView w_, b_, dw_, db_;
  bool relu_ = false;
  DeviceBuffer masked_;  // grad_out through the fused ReLU
};

}  // namespace kubetrain::nn

#endif  // KUBETRAIN_RUNTIME_NN_DENSE_H_
