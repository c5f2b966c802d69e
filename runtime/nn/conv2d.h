// Conv2D over NHWC images by im2col + one GEMM for the whole batch.
// Weights are {filters, kernel_h, kernel_w, in_channels}; bias {filters}.
// Padding "same" (stride 1 keeps the size) or "valid" or an explicit count.
// Not thread-safe (keeps the im2col matrix of the last Forward).
#ifndef KUBETRAIN_RUNTIME_NN_CONV2D_H_
#define KUBETRAIN_RUNTIME_NN_CONV2D_H_

#include "runtime/nn/layer.h"
#include "runtime/tensor/aligned_buffer.h"

namespace kubetrain::nn {

struct Conv2DOptions {
  int64_t filters = 0;
  int64_t kernel = 3;
  int64_t stride = 1;
  // Zero padding on each side; -1 means "same" (kernel / 2).
  int64_t padding = -1;
};

class Conv2D : public Layer {
 public:
  explicit Conv2D(Conv2DOptions options) : opt_(options) {}

  std::string kind() const override { return "conv2d"; }
  absl::StatusOr<Shape> Build(const Shape& input_shape) override;
  void DeclareParams(FlatParameters& flat, const std::string& prefix) override;
  void BindParams(FlatParameters& flat) override;
  void InitParams(std::mt19937_64& rng) override;
  int64_t NumParams() const override { return opt_.filters * patch_ + opt_.filters; }
  void Forward(const TensorView& in, const TensorView& out, bool training) override;
  void Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                const TensorView* grad_in) override;
  int64_t ForwardFlops(int64_t batch) const override;
  int64_t BackwardFlops(int64_t batch) const override;
  int64_t InputGradFlops(int64_t batch) const override { return ForwardFlops(batch); }
  std::string Describe() const override;

 private:
  void Im2Col(const float* in, int64_t n);
  void Col2Im(const float* col, int64_t n, float* grad_in);

  Conv2DOptions opt_;
  int64_t pad_ = 0;
  int64_t in_h_ = 0, in_w_ = 0, in_c_ = 0, out_h_ = 0, out_w_ = 0;
  int64_t patch_ = 0;  // kernel * kernel * in_c
  int w_index_ = -1, b_index_ = -1;
  TensorView w_, b_, dw_, db_;
  AlignedBuffer col_;   // {N * out_h * out_w, patch}
  AlignedBuffer dcol_;  // same shape, backward scratch
};

}  // namespace kubetrain::nn

#endif  // KUBETRAIN_RUNTIME_NN_CONV2D_H_
