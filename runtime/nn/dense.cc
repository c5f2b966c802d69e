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
  const DenseShape s{.batch = in.dim(0), .inputs = inputs_, .units = units_, .relu = relu_};
  device().DenseForward(s, in.data(), w_.data(), b_.data(), out.data());
}

void Dense::Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                     const TensorView* grad_in) {
  const DenseShape s{.batch = in.dim(0), .inputs = inputs_, .units = units_, .relu = relu_};
  if (relu_) GrowScratch(masked_, static_cast<size_t>(ScratchBytes(s.batch)));
  device().DenseBackward(s, in.data(), w_.data(), out.data(), grad_out.data(),
                         relu_ ? masked_.data() : nullptr, dw_.data(), db_.data(),
                         grad_in != nullptr ? grad_in->data() : nullptr);
}

int64_t Dense::ForwardFlops(int64_t batch) const { return 2 * batch * units_ * inputs_; }
int64_t Dense::BackwardFlops(int64_t batch) const { return 4 * batch * units_ * inputs_; }

std::string Dense::Describe() const { return absl::StrCat("dense(units=", units_, ")"); }

}  // namespace kubetrain::nn
