#include "runtime/nn/softmax_cross_entropy.h"

#include <cmath>

namespace kubetrain::nn {

LossResult SoftmaxCrossEntropy(const TensorView& logits, const int32_t* labels,
                               const TensorView* grad_logits) {
  const int64_t n = logits.dim(0);
  const int64_t k = logits.dim(1);
  LossResult r;
  for (int64_t i = 0; i < n; ++i) {
    const float* z = logits.data() + i * k;
    int64_t best = 0;
    for (int64_t j = 1; j < k; ++j) {
      if (z[j] > z[best]) best = j;
    }
    if (best == labels[i]) ++r.correct;
    // log-sum-exp shifted by the max for stability, in double.
    const double m = z[best];
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += std::exp(static_cast<double>(z[j]) - m);
    const double lse = m + std::log(sum);
    r.loss += lse - z[labels[i]];
    if (grad_logits != nullptr) {
      float* g = grad_logits->data() + i * k;
      for (int64_t j = 0; j < k; ++j) {
        const double p = std::exp(static_cast<double>(z[j]) - lse);
        g[j] = static_cast<float>((p - (j == labels[i] ? 1.0 : 0.0)) / static_cast<double>(n));
      }
    }
  }
  r.loss /= static_cast<double>(n);
  return r;
}

}  // namespace kubetrain::nn
