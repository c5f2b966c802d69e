#include "runtime/nn/softmax_cross_entropy.h"

#include "runtime/tensor/cpu_device.h"

namespace kubetrain::nn {

LossResult SoftmaxCrossEntropy(const TensorView& logits, const int32_t* labels,
                               const TensorView* grad_logits) {
  CpuDevice cpu;
  // The CPU device never fails.
  return *SoftmaxCrossEntropy(cpu, logits, labels, grad_logits);
}

absl::StatusOr<LossResult> SoftmaxCrossEntropy(ComputeDevice& device, const TensorView& logits,
                                               const int32_t* host_labels,
                                               const TensorView* grad_logits) {
  const int64_t n = logits.dim(0);
  absl::StatusOr<LossSums> s =
      device.SoftmaxCrossEntropy(logits.data(), n, logits.dim(1), host_labels,
                                 grad_logits == nullptr ? nullptr : grad_logits->data());
  if (!s.ok()) return s.status();
  LossResult r;
  r.loss = s->loss / static_cast<double>(n);
  r.correct = s->correct;
  return r;
}

}  // namespace kubetrain::nn
