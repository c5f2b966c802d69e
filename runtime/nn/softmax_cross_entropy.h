// Softmax cross-entropy loss over logits {N, classes} with integer labels,
// averaged over the batch; the row kernel is
// runtime/tensor/kernels/softmax_cross_entropy.h. Stateless; thread-safe.
#ifndef KUBETRAIN_RUNTIME_NN_SOFTMAX_CROSS_ENTROPY_H_
#define KUBETRAIN_RUNTIME_NN_SOFTMAX_CROSS_ENTROPY_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/tensor/compute_device.h"
#include "runtime/tensor/tensor_view.h"

namespace kubetrain::nn {

struct LossResult {
  double loss = 0;      // mean over the batch
  int64_t correct = 0;  // arg-max predictions equal to the label
};

// Computes the mean loss and, when grad_logits is non-null, writes
// d(mean loss)/d(logits) = (softmax - onehot) / N into it. Labels must lie in
// [0, classes); the caller validates data before training. Host memory.
LossResult SoftmaxCrossEntropy(const TensorView& logits, const int32_t* labels,
                               const TensorView* grad_logits);

// The same on `device`: logits and grad_logits in its memory, labels on the
// host. Errors are the device's (a failed kernel).
absl::StatusOr<LossResult> SoftmaxCrossEntropy(ComputeDevice& device, const TensorView& logits,
                                               const int32_t* host_labels,
                                               const TensorView* grad_logits);

}  // namespace kubetrain::nn

#endif  // KUBETRAIN_RUNTIME_NN_SOFTMAX_CROSS_ENTROPY_H_
