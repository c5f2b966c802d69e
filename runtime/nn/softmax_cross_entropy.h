// Softmax cross-entropy loss over logits {N, classes} with integer labels,
// averaged over the batch. Stateless; thread-safe.
#ifndef KUBETRAIN_RUNTIME_NN_SOFTMAX_CROSS_ENTROPY_H_
#define KUBETRAIN_RUNTIME_NN_SOFTMAX_CROSS_ENTROPY_H_

#include <cstdint>

#include "runtime/tensor/tensor_view.h"

namespace kubetrain::nn {

struct LossResult {
  double loss = 0;      // mean over the batch
  int64_t correct = 0;  // arg-max predictions equal to the label
};

// Computes the mean loss and, when grad_logits is non-null, writes
// d(mean loss)/d(logits) = (softmax - onehot) / N into it. Labels must lie in
// [0, classes); the caller validates data before training.
LossResult SoftmaxCrossEntropy(const TensorView& logits, const int32_t* labels,
                               const TensorView* grad_logits);

}  // namespace kubetrain::nn

#endif  // KUBETRAIN_RUNTIME_NN_SOFTMAX_CROSS_ENTROPY_H_
