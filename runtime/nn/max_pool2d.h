// MaxPool2D over NHWC images, no padding ("valid"); stride defaults to the
// window size. Remembers the arg-max of each output for Backward.
// Computes through its ComputeDevice (layer.h). Not thread-safe.
#ifndef KUBETRAIN_RUNTIME_NN_MAX_POOL2D_H_
#define KUBETRAIN_RUNTIME_NN_MAX_POOL2D_H_

#include "runtime/nn/layer.h"

namespace kubetrain::nn {

class MaxPool2D : public Layer {
 public:
  MaxPool2D(int64_t size, int64_t stride) : size_(size), stride_(stride > 0 ? stride : size) {}

  std::string kind() const override { return "maxpool2d"; }
  absl::StatusOr<Shape> Build(const Shape& input_shape) override;
  void Forward(const TensorView& in, const TensorView& out, bool training) override;
  void Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                const TensorView* grad_in) override;
  absl::Status Reserve(int64_t batch) override;
  int64_t ScratchBytes(int64_t batch) const override;
  std::string Describe() const override;

 private:
  int64_t size_, stride_;
  int64_t in_h_ = 0, in_w_ = 0, c_ = 0, out_h_ = 0, out_w_ = 0;
  DeviceBuffer argmax_;  // int32 per output element: offset within its image
};

}  // namespace kubetrain::nn

#endif  // KUBETRAIN_RUNTIME_NN_MAX_POOL2D_H_
