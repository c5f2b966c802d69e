#include "runtime/nn/max_pool2d.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/tensor/kernels/max_pool.h"

namespace kubetrain::nn {

absl::StatusOr<Shape> MaxPool2D::Build(const Shape& input_shape) {
  if (size_ <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("size must be > 0, got ", size_));
  }
  if (input_shape.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expects an image input [height, width, channels], got ", ShapeToString(input_shape)));
  }
  in_h_ = input_shape[0];
  in_w_ = input_shape[1];
  c_ = input_shape[2];
  if (in_h_ < size_ || in_w_ < size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("window ", size_, " is larger than the input ", ShapeToString(input_shape)));
  }
  out_h_ = (in_h_ - size_) / stride_ + 1;
  out_w_ = (in_w_ - size_) / stride_ + 1;
  return Shape{out_h_, out_w_, c_};
}

int64_t MaxPool2D::ScratchBytes(int64_t batch) const {
  return batch * out_h_ * out_w_ * c_ * static_cast<int64_t>(sizeof(int32_t));
}

absl::Status MaxPool2D::Reserve(int64_t batch) {
  return EnsureBytes(device(), argmax_, static_cast<size_t>(ScratchBytes(batch)));
}

void MaxPool2D::Forward(const TensorView& in, const TensorView& out, bool training) {
  const int64_t n = in.dim(0);
  const kernels::MaxPoolGeometry g{in_h_, in_w_, c_, out_h_, out_w_, size_, stride_};
  GrowScratch(argmax_, static_cast<size_t>(ScratchBytes(n)));
  device().MaxPoolForward(g, n, in.data(), out.data(), argmax_.ints());
}

void MaxPool2D::Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                         const TensorView* grad_in) {
  if (grad_in == nullptr) return;
  const kernels::MaxPoolGeometry g{in_h_, in_w_, c_, out_h_, out_w_, size_, stride_};
  device().MaxPoolBackward(g, in.dim(0), grad_out.data(), argmax_.ints(), grad_in->data());
}

std::string MaxPool2D::Describe() const {
  return absl::StrCat("maxpool2d(size=", size_, ", stride=", stride_, ")");
}

}  // namespace kubetrain::nn
