#include "runtime/nn/dense.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/nn/init.h"

namespace kubetrain::nn {

absl::StatusOr<Shape> Dense::Build(const Shape& input_shape) {
  if (units_ <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("units must be > 0, got ", units_));
  }
  if (input_shape.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("expects a flat input, got ",
                                                   ShapeToString(input_shape),
                                                   " (add a flatten layer before it)"));
  }
  inputs_ = input_shape[0];
  return Shape{units_};
}

void Dense::DeclareParams(FlatParameters& flat, const std::string& prefix) {
  w_index_ = flat.Reserve(prefix + "weight", {units_, inputs_});
  b_index_ = flat.Reserve(prefix + "bias", {units_});
}

void Dense::BindParams(FlatParameters& flat) {
  w_ = flat.Param(w_index_);
  b_ = flat.Param(b_index_);
  dw_ = flat.Grad(w_index_);
  db_ = flat.Grad(b_index_);
}

void Dense::InitParams(std::mt19937_64& rng) {
  HeUniform(w_, inputs_, rng);
  Fill(b_, 0.0f);
}

absl::Status Dense::Reserve(int64_t batch) {
  if (!relu_) return absl::OkStatus();
  return EnsureBytes(device(), masked_, static_cast<size_t>(ScratchBytes(batch)));
}

int64_t Dense::ScratchBytes(int64_t batch) const {
  return relu_ ? batch * units_ * static_cast<int64_t>(sizeof(float)) : 0;
}

void Dense::Forward(const TensorView& in, const TensorView& out, bool training) {
  ComputeDevice& d = device();
  const int64_t n = in.dim(0);
  // Broadcast the bias into out, then out += in * W^T.
  d.BroadcastRows(b_.data(), n, units_, out.data());
  d.Gemm(Trans::kNo, Trans::kYes, n, units_, inputs_, 1.0f, in.data(), inputs_, w_.data(), inputs_,
         1.0f, out.data(), units_);
  if (relu_) d.ReluForward(out.data(), out.data(), n * units_);
}

void Dense::Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                     const TensorView* grad_in) {
  ComputeDevice& d = device();
  const int64_t n = in.dim(0);
  const float* gy = grad_out.data();
  if (relu_) {
    GrowScratch(masked_, static_cast<size_t>(ScratchBytes(n)));
    d.ReluBackward(out.data(), gy, masked_.data(), n * units_);
    gy = masked_.data();
  }
  // dW = dY^T * X ; db = sum_rows(dY) ; dX = dY * W
  d.Gemm(Trans::kYes, Trans::kNo, units_, inputs_, n, 1.0f, gy, units_, in.data(), inputs_, 0.0f,
         dw_.data(), inputs_);
  d.SumRows(gy, n, units_, db_.data());
  if (grad_in != nullptr) {
    d.Gemm(Trans::kNo, Trans::kNo, n, inputs_, units_, 1.0f, gy, units_, w_.data(), inputs_, 0.0f,
           grad_in->data(), inputs_);
  }
}

int64_t Dense::ForwardFlops(int64_t batch) const { return 2 * batch * units_ * inputs_; }
int64_t Dense::BackwardFlops(int64_t batch) const { return 4 * batch * units_ * inputs_; }

std::string Dense::Describe() const { return absl::StrCat("dense(units=", units_, ")"); }

}  // namespace kubetrain::nn
