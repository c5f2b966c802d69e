#include "runtime/nn/dropout.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/tensor/kernels/dropout_mask.h"

namespace kubetrain::nn {

absl::StatusOr<Shape> Dropout::Build(const Shape& input_shape) {
  if (!(rate_ >= 0.0f && rate_ < 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("rate must be in [0, 1), got ", rate_));
  }
  sample_ = NumElements(input_shape);
  return input_shape;
}

int64_t Dropout::ScratchBytes(int64_t batch) const {
  return rate_ > 0.0f ? batch * sample_ * static_cast<int64_t>(sizeof(float)) : 0;
}

absl::Status Dropout::Reserve(int64_t batch) {
  if (rate_ <= 0.0f) return absl::OkStatus();
  return EnsureBytes(device(), mask_, static_cast<size_t>(ScratchBytes(batch)));
}

void Dropout::Forward(const TensorView& in, const TensorView& out, bool training) {
  const int64_t n = in.size();
  last_training_ = training && rate_ > 0.0f;
  if (!last_training_) {
    device().Copy(in.data(), out.data(), n);
    return;
  }
  GrowScratch(mask_, static_cast<size_t>(n) * sizeof(float));
  ::kubetrain::kernels::DropoutParams p =
      ::kubetrain::kernels::MakeDropoutParams(seed_, calls_, rate_);
  if (device_calls_ != nullptr) {
    p.call_from = device_calls_;
  } else {
    ++calls_;
  }
  device().DropoutForward(p, in.data(), mask_.data(), out.data(), n);
}

void Dropout::Backward(const TensorView& in, const TensorView& out, const TensorView& grad_out,
                       const TensorView* grad_in) {
  if (grad_in == nullptr) return;
  const int64_t n = grad_out.size();
  if (!last_training_) {
    device().Copy(grad_out.data(), grad_in->data(), n);
    return;
  }
  device().Multiply(grad_out.data(), mask_.data(), grad_in->data(), n);
}

std::string Dropout::Describe() const { return absl::StrCat("dropout(rate=", rate_, ")"); }

}  // namespace kubetrain::nn
