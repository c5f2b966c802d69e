#include "runtime/nn/dense.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/nn/init.h"
#include "runtime/nn/kernels/relu.h"
#include "runtime/tensor/parallel_gemm.h"

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

void Dense::Forward(const TensorView& in, const TensorView& out, bool training) {
  const int64_t n = in.dim(0);
  // Broadcast the bias into out, then out += in * W^T.
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(out.data() + i * units_, b_.data(), units_ * sizeof(float));
  }
  ParallelGemm(Trans::kNo, Trans::kYes, n, units_, inputs_, 1.0f, in.data(), inputs_, w_.data(),
               inputs_, 1.0f, out.data(), units_);
  if (relu_) kernels::ReluForward(0, n * units_, out.data(), out.data());
}

void Dense::Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                     const TensorView* grad_in) {
  const int64_t n = in.dim(0);
  const float* gy = grad_out.data();
  if (relu_) {
    masked_.EnsureSize(static_cast<size_t>(n * units_));
    kernels::ReluBackward(0, n * units_, out.data(), gy, masked_.data());
    gy = masked_.data();
  }
  // dW = dY^T * X ; db = sum_rows(dY) ; dX = dY * W
  ParallelGemm(Trans::kYes, Trans::kNo, units_, inputs_, n, 1.0f, gy, units_, in.data(), inputs_,
               0.0f, dw_.data(), inputs_);
  Fill(db_, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    const float* g = gy + i * units_;
    for (int64_t j = 0; j < units_; ++j) db_[j] += g[j];
  }
  if (grad_in != nullptr) {
    ParallelGemm(Trans::kNo, Trans::kNo, n, inputs_, units_, 1.0f, gy, units_, w_.data(), inputs_,
                 0.0f, grad_in->data(), inputs_);
  }
}

int64_t Dense::ForwardFlops(int64_t batch) const { return 2 * batch * units_ * inputs_; }
int64_t Dense::BackwardFlops(int64_t batch) const { return 4 * batch * units_ * inputs_; }

std::string Dense::Describe() const { return absl::StrCat("dense(units=", units_, ")"); }

}  // namespace kubetrain::nn
