#include "runtime/nn/conv2d.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/nn/init.h"
#include "runtime/tensor/blas.h"

namespace kubetrain::nn {

absl::StatusOr<Shape> Conv2D::Build(const Shape& input_shape) {
  if (opt_.filters <= 0 || opt_.kernel <= 0 || opt_.stride <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("filters, kernel and stride must be > 0, got filters=", opt_.filters,
                     " kernel=", opt_.kernel, " stride=", opt_.stride));
  }
  if (input_shape.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expects an image input [height, width, channels], got ", ShapeToString(input_shape)));
  }
  in_h_ = input_shape[0];
  in_w_ = input_shape[1];
  in_c_ = input_shape[2];
  pad_ = opt_.padding < 0 ? opt_.kernel / 2 : opt_.padding;
  const int64_t eff_h = in_h_ + 2 * pad_ - opt_.kernel;
  const int64_t eff_w = in_w_ + 2 * pad_ - opt_.kernel;
  if (eff_h < 0 || eff_w < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel ", opt_.kernel, " is larger than the padded input ", ShapeToString(input_shape)));
  }
  out_h_ = eff_h / opt_.stride + 1;
  out_w_ = eff_w / opt_.stride + 1;
  patch_ = opt_.kernel * opt_.kernel * in_c_;
  return Shape{out_h_, out_w_, opt_.filters};
}

void Conv2D::DeclareParams(FlatParameters& flat, const std::string& prefix) {
  w_index_ = flat.Reserve(prefix + "kernel", {opt_.filters, opt_.kernel, opt_.kernel, in_c_});
  b_index_ = flat.Reserve(prefix + "bias", {opt_.filters});
}

void Conv2D::BindParams(FlatParameters& flat) {
  w_ = flat.Param(w_index_);
  b_ = flat.Param(b_index_);
  dw_ = flat.Grad(w_index_);
  db_ = flat.Grad(b_index_);
}

void Conv2D::InitParams(std::mt19937_64& rng) {
  HeUniform(w_, patch_, rng);
  Fill(b_, 0.0f);
}

void Conv2D::Im2Col(const float* in, int64_t n) {
  const int64_t k = opt_.kernel, s = opt_.stride;
  const size_t cbytes = static_cast<size_t>(in_c_) * sizeof(float);
  float* row = col_.data();
  for (int64_t b = 0; b < n; ++b) {
    const float* img = in + b * in_h_ * in_w_ * in_c_;
    for (int64_t oh = 0; oh < out_h_; ++oh) {
      for (int64_t ow = 0; ow < out_w_; ++ow, row += patch_) {
        float* dst = row;
        for (int64_t kh = 0; kh < k; ++kh) {
          const int64_t ih = oh * s - pad_ + kh;
          for (int64_t kw = 0; kw < k; ++kw, dst += in_c_) {
            const int64_t iw = ow * s - pad_ + kw;
            if (ih < 0 || ih >= in_h_ || iw < 0 || iw >= in_w_) {
              std::memset(dst, 0, cbytes);
            } else {
              std::memcpy(dst, img + (ih * in_w_ + iw) * in_c_, cbytes);
            }
          }
        }
      }
    }
  }
}

void Conv2D::Col2Im(const float* col, int64_t n, float* grad_in) {
  const int64_t k = opt_.kernel, s = opt_.stride;
  std::memset(grad_in, 0, static_cast<size_t>(n * in_h_ * in_w_ * in_c_) * sizeof(float));
  const float* row = col;
  for (int64_t b = 0; b < n; ++b) {
    float* img = grad_in + b * in_h_ * in_w_ * in_c_;
    for (int64_t oh = 0; oh < out_h_; ++oh) {
      for (int64_t ow = 0; ow < out_w_; ++ow, row += patch_) {
        const float* src = row;
        for (int64_t kh = 0; kh < k; ++kh) {
          const int64_t ih = oh * s - pad_ + kh;
          for (int64_t kw = 0; kw < k; ++kw, src += in_c_) {
            const int64_t iw = ow * s - pad_ + kw;
            if (ih < 0 || ih >= in_h_ || iw < 0 || iw >= in_w_) continue;
            float* dst = img + (ih * in_w_ + iw) * in_c_;
            for (int64_t c = 0; c < in_c_; ++c) dst[c] += src[c];
          }
        }
      }
    }
  }
}

void Conv2D::Forward(const TensorView& in, const TensorView& out, bool training) {
  const int64_t n = in.dim(0);
  const int64_t rows = n * out_h_ * out_w_;
  col_.EnsureSize(static_cast<size_t>(rows * patch_));
  Im2Col(in.data(), n);
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(out.data() + r * opt_.filters, b_.data(), opt_.filters * sizeof(float));
  }
  // out{rows, F} += col{rows, patch} * W^T{patch, F}
  Gemm(Trans::kNo, Trans::kYes, rows, opt_.filters, patch_, 1.0f, col_.data(), patch_, w_.data(),
       patch_, 1.0f, out.data(), opt_.filters);
}

void Conv2D::Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                      const TensorView* grad_in) {
  const int64_t n = in.dim(0);
  const int64_t rows = n * out_h_ * out_w_;
  const int64_t f = opt_.filters;
  // dW{F, patch} = dY^T{F, rows} * col{rows, patch}
  Gemm(Trans::kYes, Trans::kNo, f, patch_, rows, 1.0f, grad_out.data(), f, col_.data(), patch_,
       0.0f, dw_.data(), patch_);
  Fill(db_, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = grad_out.data() + r * f;
    for (int64_t j = 0; j < f; ++j) db_[j] += g[j];
  }
  if (grad_in != nullptr) {
    dcol_.EnsureSize(static_cast<size_t>(rows * patch_));
    // dcol{rows, patch} = dY{rows, F} * W{F, patch}
    Gemm(Trans::kNo, Trans::kNo, rows, patch_, f, 1.0f, grad_out.data(), f, w_.data(), patch_, 0.0f,
         dcol_.data(), patch_);
    Col2Im(dcol_.data(), n, grad_in->data());
  }
}

int64_t Conv2D::ForwardFlops(int64_t batch) const {
  return 2 * batch * out_h_ * out_w_ * opt_.filters * patch_;
}
int64_t Conv2D::BackwardFlops(int64_t batch) const { return 2 * ForwardFlops(batch); }

std::string Conv2D::Describe() const {
  return absl::StrCat("conv2d(filters=", opt_.filters, ", kernel=", opt_.kernel,
                      ", stride=", opt_.stride, ", padding=", pad_, ")");
}

}  // namespace kubetrain::nn
