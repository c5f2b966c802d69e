#include "runtime/nn/max_pool2d.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/nn/kernels/max_pool.h"
#include "runtime/tensor/kernels/cpu_clones.h"
#include "runtime/tensor/parallel_for.h"

namespace kubetrain::nn {
namespace {

// CPU launch wrappers: the kernels vectorised for the CPU's best ISA.
KT_CPU_CLONES void ForwardImages(const kernels::MaxPoolGeometry& g, int64_t begin, int64_t end,
                                 const float* x, float* y, int32_t* argmax) {
  kernels::MaxPoolForward(g, begin, end, x, y, argmax);
}

KT_CPU_CLONES void BackwardImages(const kernels::MaxPoolGeometry& g, int64_t begin, int64_t end,
                                  const float* gy, const int32_t* argmax, float* gx) {
  kernels::MaxPoolBackward(g, begin, end, gy, argmax, gx);
}

}  // namespace

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

void MaxPool2D::Forward(const TensorView& in, const TensorView& out, bool training) {
  const int64_t n = in.dim(0);
  const kernels::MaxPoolGeometry g{in_h_, in_w_, c_, out_h_, out_w_, size_, stride_};
  argmax_.resize(static_cast<size_t>(n * g.out_image()));
  ParallelFor(n, 1, [&](int, int64_t begin, int64_t end) {
    ForwardImages(g, begin, end, in.data(), out.data(), argmax_.data());
  });
}

void MaxPool2D::Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                         const TensorView* grad_in) {
  if (grad_in == nullptr) return;
  const int64_t n = in.dim(0);
  const kernels::MaxPoolGeometry g{in_h_, in_w_, c_, out_h_, out_w_, size_, stride_};
  ParallelFor(n, 1, [&](int, int64_t begin, int64_t end) {
    BackwardImages(g, begin, end, grad_out.data(), argmax_.data(), grad_in->data());
  });
}

std::string MaxPool2D::Describe() const {
  return absl::StrCat("maxpool2d(size=", size_, ", stride=", stride_, ")");
}

}  // namespace kubetrain::nn
