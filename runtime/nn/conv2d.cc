#include "runtime/nn/conv2d.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/nn/init.h"
#include "runtime/tensor/blas.h"
#include "runtime/tensor/kernels/relu.h"
#include "runtime/tensor/parallel_for.h"

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
  direct_ = opt_.algorithm == ConvAlgorithm::kDirect ||
            (opt_.algorithm == ConvAlgorithm::kAuto && patch_ < 32);
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

int64_t Conv2D::GroupImages() const {
  // About half of a 1 MiB L2: the group's output and weights share it.
  constexpr int64_t kColFloats = (512 << 10) / sizeof(float);
  return std::max<int64_t>(1, kColFloats / (out_h_ * out_w_ * patch_));
}

void Conv2D::EnsureScratch(int chunks, bool backward) {
  if (static_cast<int>(scratch_.size()) < chunks) scratch_.resize(static_cast<size_t>(chunks));
  const size_t col = static_cast<size_t>(GroupImages() * out_h_ * out_w_ * patch_);
  for (int c = 0; c < chunks; ++c) {
    Scratch& s = scratch_[static_cast<size_t>(c)];
    s.col.EnsureSize(col);
    if (backward) {
      s.dcol.EnsureSize(col);
      s.dw.EnsureSize(static_cast<size_t>(opt_.filters * patch_));
      s.db.EnsureSize(static_cast<size_t>(opt_.filters));
    }
  }
}

void Conv2D::Im2Col(const float* in, int64_t first, int64_t count, float* col) const {
  const int64_t k = opt_.kernel, s = opt_.stride;
  const size_t cbytes = static_cast<size_t>(in_c_) * sizeof(float);
  float* row = col;
  for (int64_t b = first; b < first + count; ++b) {
    const float* img = in + b * in_h_ * in_w_ * in_c_;
    for (int64_t oh = 0; oh < out_h_; ++oh) {
      for (int64_t ow = 0; ow < out_w_; ++ow, row += patch_) {
        float* dst = row;
        for (int64_t kh = 0; kh < k; ++kh) {
          const int64_t ih = oh * s - pad_ + kh;
          const bool row_in = ih >= 0 && ih < in_h_;
          for (int64_t kw = 0; kw < k; ++kw, dst += in_c_) {
            const int64_t iw = ow * s - pad_ + kw;
            const bool in_image = row_in && iw >= 0 && iw < in_w_;
            if (in_c_ == 1) {
              *dst = in_image ? img[ih * in_w_ + iw] : 0.0f;
            } else if (in_image) {
              std::memcpy(dst, img + (ih * in_w_ + iw) * in_c_, cbytes);
            } else {
              std::memset(dst, 0, cbytes);
            }
          }
        }
      }
    }
  }
}

void Conv2D::Col2Im(const float* dcol, int64_t first, int64_t count, float* grad_in) const {
  const int64_t k = opt_.kernel, s = opt_.stride;
  const int64_t image = in_h_ * in_w_ * in_c_;
  std::memset(grad_in + first * image, 0, static_cast<size_t>(count * image) * sizeof(float));
  const float* row = dcol;
  for (int64_t b = first; b < first + count; ++b) {
    float* img = grad_in + b * image;
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

ConvGeometry Conv2D::Geometry() const {
  return {in_h_, in_w_, in_c_, out_h_, out_w_, opt_.kernel, opt_.stride, pad_, opt_.filters};
}

void Conv2D::TransposeWeights() {
  const int64_t f = opt_.filters;
  wt_.EnsureSize(static_cast<size_t>(f * patch_));
  for (int64_t j = 0; j < f; ++j) {
    for (int64_t p = 0; p < patch_; ++p) wt_.data()[p * f + j] = w_[j * patch_ + p];
  }
}

void Conv2D::ForwardDirect(const TensorView& in, const TensorView& out) {
  TransposeWeights();
  const ConvGeometry g = Geometry();
  const int64_t in_image = in_h_ * in_w_ * in_c_;
  const int64_t out_image = out_h_ * out_w_ * opt_.filters;
  ParallelFor(in.dim(0), 1, [&](int, int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      float* y = out.data() + b * out_image;
      DirectConvForward(g, 0, 1, in.data() + b * in_image, wt_.data(), b_.data(), y);
      if (relu_) kernels::ReluForward(0, out_image, y, y);
    }
  });
}

void Conv2D::BackwardDirect(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                            const TensorView* grad_in) {
  const int64_t n = in.dim(0);
  const int64_t f = opt_.filters;
  const int chunks = ParallelChunks(n, 1);
  if (static_cast<int>(scratch_.size()) < chunks) scratch_.resize(static_cast<size_t>(chunks));
  TransposeWeights();
  const ConvGeometry g = Geometry();
  const int64_t in_image = in_h_ * in_w_ * in_c_;
  const int64_t out_image = out_h_ * out_w_ * f;
  ParallelFor(n, 1, [&](int chunk, int64_t begin, int64_t end) {
    Scratch& s = scratch_[static_cast<size_t>(chunk)];
    s.dw.EnsureSize(static_cast<size_t>(f * patch_));
    s.db.EnsureSize(static_cast<size_t>(f));
    std::fill_n(s.dw.data(), f * patch_, 0.0f);
    std::fill_n(s.db.data(), f, 0.0f);
    if (relu_) s.gy.EnsureSize(static_cast<size_t>(out_image));
    for (int64_t b = begin; b < end; ++b) {
      const float* gy = grad_out.data() + b * out_image;
      if (relu_) {
        kernels::ReluBackward(0, out_image, out.data() + b * out_image, gy, s.gy.data());
        gy = s.gy.data();
      }
      DirectConvParamGrad(g, 0, 1, in.data() + b * in_image, gy, s.dw.data(), s.db.data());
      if (grad_in != nullptr) {
        DirectConvInputGrad(g, 0, 1, gy, wt_.data(), grad_in->data() + b * in_image);
      }
    }
  });
  // Sum the chunks' gradients in chunk order, then transpose dW back.
  float* dwt = scratch_[0].dw.data();
  float* db = scratch_[0].db.data();
  for (int c = 1; c < chunks; ++c) {
    const Scratch& s = scratch_[static_cast<size_t>(c)];
    for (int64_t i = 0; i < f * patch_; ++i) dwt[i] += s.dw.data()[i];
    for (int64_t j = 0; j < f; ++j) db[j] += s.db.data()[j];
  }
  for (int64_t j = 0; j < f; ++j) {
    for (int64_t p = 0; p < patch_; ++p) dw_[j * patch_ + p] = dwt[p * f + j];
    db_[j] = db[j];
  }
}

::kubetrain::kernels::ConvShape Conv2D::ConvShapeOf() const {
  return {in_h_, in_w_, in_c_, out_h_, out_w_, opt_.kernel, opt_.stride, pad_};
}

int64_t Conv2D::DeviceGroupImages() const {
  constexpr int64_t kDeviceColFloats = (int64_t{64} << 20) / sizeof(float);
  return std::max<int64_t>(1, kDeviceColFloats / (out_h_ * out_w_ * patch_));
}

int64_t Conv2D::ScratchBytes(int64_t batch) const {
  if (opt_.algorithm != ConvAlgorithm::kDevice && device().host_memory()) return 0;
  const int64_t group = std::min(batch, DeviceGroupImages());
  const int64_t col = group * out_h_ * out_w_ * patch_;
  const int64_t gy = relu_ ? batch * out_h_ * out_w_ * opt_.filters : 0;
  return (2 * col + gy) * static_cast<int64_t>(sizeof(float));
}

absl::Status Conv2D::Reserve(int64_t batch) {
  if (!OnDevicePath()) return absl::OkStatus();
  const size_t col =
      static_cast<size_t>(std::min(batch, DeviceGroupImages()) * out_h_ * out_w_ * patch_) *
      sizeof(float);
  if (absl::Status s = EnsureBytes(device(), dev_col_, col); !s.ok()) return s;
  if (absl::Status s = EnsureBytes(device(), dev_dcol_, col); !s.ok()) return s;
  if (!relu_) return absl::OkStatus();
  return EnsureBytes(device(), dev_gy_,
                     static_cast<size_t>(batch * out_h_ * out_w_ * opt_.filters) * sizeof(float));
}

void Conv2D::ForwardOnDevice(const TensorView& in, const TensorView& out) {
  ComputeDevice& d = device();
  const ::kubetrain::kernels::ConvShape g = ConvShapeOf();
  const int64_t n = in.dim(0), pixels = out_h_ * out_w_, f = opt_.filters;
  const int64_t group = std::min(n, DeviceGroupImages());
  GrowScratch(dev_col_, static_cast<size_t>(group * pixels * patch_) * sizeof(float));
  d.BroadcastRows(b_.data(), n * pixels, f, out.data());
  for (int64_t first = 0; first < n; first += group) {
    const int64_t count = std::min(group, n - first);
    const int64_t rows = count * pixels;
    d.Im2Col(g, count, in.data() + first * g.in_image(), dev_col_.data());
    // y{rows, F} += col{rows, patch} * W^T{patch, F}
    d.Gemm(Trans::kNo, Trans::kYes, rows, f, patch_, 1.0f, dev_col_.data(), patch_, w_.data(),
           patch_, 1.0f, out.data() + first * pixels * f, f);
  }
  if (relu_) d.ReluForward(out.data(), out.data(), n * pixels * f);
}

void Conv2D::BackwardOnDevice(const TensorView& in, const TensorView& out,
                              const TensorView& grad_out, const TensorView* grad_in) {
  ComputeDevice& d = device();
  const ::kubetrain::kernels::ConvShape g = ConvShapeOf();
  const int64_t n = in.dim(0), pixels = out_h_ * out_w_, f = opt_.filters;
  const int64_t group = std::min(n, DeviceGroupImages());
  const size_t col_bytes = static_cast<size_t>(group * pixels * patch_) * sizeof(float);
  GrowScratch(dev_col_, col_bytes);
  GrowScratch(dev_dcol_, col_bytes);
  const float* gy = grad_out.data();
  if (relu_) {
    GrowScratch(dev_gy_, static_cast<size_t>(n * pixels * f) * sizeof(float));
    d.ReluBackward(out.data(), gy, dev_gy_.data(), n * pixels * f);
    gy = dev_gy_.data();
  }
  d.SumRows(gy, n * pixels, f, db_.data());
  for (int64_t first = 0; first < n; first += group) {
    const int64_t count = std::min(group, n - first);
    const int64_t rows = count * pixels;
    const float* gyg = gy + first * pixels * f;
    d.Im2Col(g, count, in.data() + first * g.in_image(), dev_col_.data());
    // dW{F, patch} (+)= dY^T{F, rows} * col{rows, patch}
    d.Gemm(Trans::kYes, Trans::kNo, f, patch_, rows, 1.0f, gyg, f, dev_col_.data(), patch_,
           first == 0 ? 0.0f : 1.0f, dw_.data(), patch_);
    if (grad_in != nullptr) {
      // dcol{rows, patch} = dY{rows, F} * W{F, patch}
      d.Gemm(Trans::kNo, Trans::kNo, rows, patch_, f, 1.0f, gyg, f, w_.data(), patch_, 0.0f,
             dev_dcol_.data(), patch_);
      d.Col2Im(g, count, dev_dcol_.data(), grad_in->data() + first * g.in_image());
    }
  }
}

void Conv2D::Forward(const TensorView& in, const TensorView& out, bool training) {
  if (OnDevicePath()) {
    ForwardOnDevice(in, out);
    return;
  }
  if (direct_) {
    ForwardDirect(in, out);
    return;
  }
  const int64_t n = in.dim(0);
  const int64_t pixels = out_h_ * out_w_;
  const int64_t f = opt_.filters;
  const int64_t group = GroupImages();
  EnsureScratch(ParallelChunks(n, 1), /*backward=*/false);
  ParallelFor(n, 1, [&](int chunk, int64_t begin, int64_t end) {
    float* col = scratch_[static_cast<size_t>(chunk)].col.data();
    for (int64_t first = begin; first < end; first += group) {
      const int64_t count = std::min(group, end - first);
      const int64_t rows = count * pixels;
      float* y = out.data() + first * pixels * f;
      Im2Col(in.data(), first, count, col);
      for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(y + r * f, b_.data(), static_cast<size_t>(f) * sizeof(float));
      }
      // y{rows, F} += col{rows, patch} * W^T{patch, F}
      Gemm(Trans::kNo, Trans::kYes, rows, f, patch_, 1.0f, col, patch_, w_.data(), patch_, 1.0f, y,
           f);
      if (relu_) kernels::ReluForward(0, rows * f, y, y);
    }
  });
}

void Conv2D::Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                      const TensorView* grad_in) {
  if (OnDevicePath()) {
    BackwardOnDevice(in, out, grad_out, grad_in);
    return;
  }
  if (direct_) {
    BackwardDirect(in, out, grad_out, grad_in);
    return;
  }
  const int64_t n = in.dim(0);
  const int64_t pixels = out_h_ * out_w_;
  const int64_t f = opt_.filters;
  const int64_t group = GroupImages();
  const int chunks = ParallelChunks(n, 1);
  EnsureScratch(chunks, /*backward=*/true);
  ParallelFor(n, 1, [&](int chunk, int64_t begin, int64_t end) {
    Scratch& s = scratch_[static_cast<size_t>(chunk)];
    std::fill_n(s.db.data(), f, 0.0f);
    if (relu_) s.gy.EnsureSize(static_cast<size_t>(group * pixels * f));
    for (int64_t first = begin; first < end; first += group) {
      const int64_t count = std::min(group, end - first);
      const int64_t rows = count * pixels;
      const float* gy = grad_out.data() + first * pixels * f;
      if (relu_) {
        kernels::ReluBackward(0, rows * f, out.data() + first * pixels * f, gy, s.gy.data());
        gy = s.gy.data();
      }
      Im2Col(in.data(), first, count, s.col.data());
      // dW{F, patch} (+)= dY^T{F, rows} * col{rows, patch}
      Gemm(Trans::kYes, Trans::kNo, f, patch_, rows, 1.0f, gy, f, s.col.data(), patch_,
           first == begin ? 0.0f : 1.0f, s.dw.data(), patch_);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < f; ++j) s.db.data()[j] += gy[r * f + j];
      }
      if (grad_in != nullptr) {
        // dcol{rows, patch} = dY{rows, F} * W{F, patch}
        Gemm(Trans::kNo, Trans::kNo, rows, patch_, f, 1.0f, gy, f, w_.data(), patch_, 0.0f,
             s.dcol.data(), patch_);
        Col2Im(s.dcol.data(), first, count, grad_in->data());
      }
    }
  });
  // Sum the chunks' gradients in chunk order.
  std::memcpy(dw_.data(), scratch_[0].dw.data(), static_cast<size_t>(f * patch_) * sizeof(float));
  std::memcpy(db_.data(), scratch_[0].db.data(), static_cast<size_t>(f) * sizeof(float));
  for (int c = 1; c < chunks; ++c) {
    const float* dw = scratch_[static_cast<size_t>(c)].dw.data();
    const float* db = scratch_[static_cast<size_t>(c)].db.data();
    for (int64_t i = 0; i < f * patch_; ++i) dw_[i] += dw[i];
    for (int64_t j = 0; j < f; ++j) db_[j] += db[j];
  }
}

int64_t Conv2D::ForwardFlops(int64_t batch) const {
  return 2 * batch * out_h_ * out_w_ * opt_.filters * patch_;
}
int64_t Conv2D::BackwardFlops(int64_t batch) const { return 2 * ForwardFlops(batch); }

std::string Conv2D::Describe() const {
  return absl::StrCat("conv2d(filters=", opt_.filters, ", kernel=", opt_.kernel,
                      ", stride=", opt_.stride, ", padding=", pad_,
                      opt_.algorithm == ConvAlgorithm::kDevice ? ", device)"
                      : direct_                                ? ", direct)"
                                                               : ")");
}

}  // namespace kubetrain::nn
