// Softmax cross-entropy of one row of logits; host/device kernel
// (host_device.h). Pure function: thread-safe.
#ifndef KUBETRAIN_RUNTIME_TENSOR_KERNELS_SOFTMAX_CROSS_ENTROPY_H_
#define KUBETRAIN_RUNTIME_TENSOR_KERNELS_SOFTMAX_CROSS_ENTROPY_H_

#include <math.h>

#include <cstdint>

#include "runtime/tensor/kernels/host_device.h"

namespace kubetrain::kernels {

// Returns -log softmax(z)[label] for the k logits z (log-sum-exp shifted by
// the maximum, in double). Sets *correct to whether the first arg-max is
// the label. When g is non-null writes g[j] = (softmax(z)[j] - [j ==
// label]) / batch, the gradient of the batch-mean loss.
KT_HOST_DEVICE inline double SoftmaxCrossEntropyRow(const float* z, int64_t k, int32_t label,
                                                    double batch, float* g, bool* correct) {
  int64_t best = 0;
  for (int64_t j = 1; j < k; ++j) {
    if (z[j] > z[best]) best = j;
  }
  *correct = best == label;
  const double m = z[best];
  double sum = 0;
  for (int64_t j = 0; j < k; ++j) sum += ::exp(static_cast<double>(z[j]) - m);
  const double lse = m + ::log(sum);
  if (g != nullptr) {
    for (int64_t j = 0; j < k; ++j) {
      const double p = ::exp(static_cast<double>(z[j]) - lse);
      g[j] = static_cast<float>((p - (j == label ? 1.0 : 0.0)) / batch);
    }
  }
  return lse - z[label];
}

}  // namespace kubetrain::kernels

#endif  // KUBETRAIN_RUNTIME_TENSOR_KERNELS_SOFTMAX_CROSS_ENTROPY_H_
