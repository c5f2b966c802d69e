#include "runtime/nn/max_pool2d.h"

#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

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

void MaxPool2D::Forward(const TensorView& in, const TensorView& out, bool training) {
  const int64_t n = in.dim(0);
  const int64_t in_img = in_h_ * in_w_ * c_;
  const int64_t out_img = out_h_ * out_w_ * c_;
  argmax_.resize(static_cast<size_t>(n * out_img));
  for (int64_t b = 0; b < n; ++b) {
    const float* x = in.data() + b * in_img;
    float* y = out.data() + b * out_img;
    int32_t* am = argmax_.data() + b * out_img;
    for (int64_t oh = 0; oh < out_h_; ++oh) {
      for (int64_t ow = 0; ow < out_w_; ++ow) {
        float* yo = y + (oh * out_w_ + ow) * c_;
        int32_t* ao = am + (oh * out_w_ + ow) * c_;
        for (int64_t c = 0; c < c_; ++c) {
          yo[c] = -std::numeric_limits<float>::infinity();
          ao[c] = 0;
        }
        for (int64_t kh = 0; kh < size_; ++kh) {
          for (int64_t kw = 0; kw < size_; ++kw) {
            const int64_t off = ((oh * stride_ + kh) * in_w_ + (ow * stride_ + kw)) * c_;
            const float* xi = x + off;
            for (int64_t c = 0; c < c_; ++c) {
              if (xi[c] > yo[c]) {
                yo[c] = xi[c];
                ao[c] = static_cast<int32_t>(off + c);
              }
            }
          }
        }
      }
    }
  }
}

void MaxPool2D::Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                         const TensorView* grad_in) {
  if (grad_in == nullptr) return;
  const int64_t n = in.dim(0);
  const int64_t in_img = in_h_ * in_w_ * c_;
  const int64_t out_img = out_h_ * out_w_ * c_;
  std::memset(grad_in->data(), 0, static_cast<size_t>(n * in_img) * sizeof(float));
  for (int64_t b = 0; b < n; ++b) {
    float* gx = grad_in->data() + b * in_img;
    const float* gy = grad_out.data() + b * out_img;
    const int32_t* am = argmax_.data() + b * out_img;
    for (int64_t i = 0; i < out_img; ++i) gx[am[i]] += gy[i];
  }
}

std::string MaxPool2D::Describe() const {
  return absl::StrCat("maxpool2d(size=", size_, ", stride=", stride_, ")");
}

}  // namespace kubetrain::nn
