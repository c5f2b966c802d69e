// Fused optimizer updates over the parameter range [begin, end): one pass
// reads the gradient and the state and writes the parameter and the state.
// Host/device kernels (host_device.h); the expressions are those of
// runtime/train/optimizer.cc, so both devices compute the same update.
// Pure functions: thread-safe for disjoint ranges.
#ifndef KUBETRAIN_RUNTIME_TENSOR_KERNELS_OPTIMIZER_UPDATE_H_
#define KUBETRAIN_RUNTIME_TENSOR_KERNELS_OPTIMIZER_UPDATE_H_

#include <math.h>

#include <cstdint>

#include "runtime/tensor/kernels/host_device.h"

namespace kubetrain::kernels {

struct SgdParams {
  float lr = 0, weight_decay = 0, momentum = 0;
  bool nesterov = false;
};

// d = g + wd * p; with momentum v = mu * v + d and p -= lr * (nesterov ?
// d + mu * v : v); without (v unused, may be null) p -= lr * d.
// The options are copied into locals first: stores through p and v may
// alias a float member of `o`, which would keep the loop from vectorising.
KT_HOST_DEVICE inline void SgdUpdate(const SgdParams& o, int64_t begin, int64_t end, float* p,
                                     const float* g, float* v) {
  const float lr = o.lr, wd = o.weight_decay, mu = o.momentum;
  const bool nesterov = o.nesterov;
  if (mu == 0.0f) {
    for (int64_t i = begin; i < end; ++i) p[i] -= lr * (g[i] + wd * p[i]);
    return;
  }
  for (int64_t i = begin; i < end; ++i) {
    const float d = g[i] + wd * p[i];
    v[i] = mu * v[i] + d;
    p[i] -= lr * (nesterov ? d + mu * v[i] : v[i]);
  }
}

struct AdamParams {
  float step = 0;  // lr * sqrt(1 - beta2^t) / (1 - beta1^t)
  float beta1 = 0, beta2 = 0, weight_decay = 0;
  float epsilon = 0;  // epsilon * sqrt(1 - beta2^t)
};

KT_HOST_DEVICE inline void AdamUpdate(const AdamParams& o, int64_t begin, int64_t end, float* p,
                                      const float* g, float* m, float* v) {
  const float step = o.step, b1 = o.beta1, b2 = o.beta2, wd = o.weight_decay, eps = o.epsilon;
  for (int64_t i = begin; i < end; ++i) {
    const float d = g[i] + wd * p[i];
    m[i] = b1 * m[i] + (1.0f - b1) * d;
    v[i] = b2 * v[i] + (1.0f - b2) * d * d;
    p[i] -= step * m[i] / (sqrtf(v[i]) + eps);
  }
}

}  // namespace kubetrain::kernels

#endif  // KUBETRAIN_RUNTIME_TENSOR_KERNELS_OPTIMIZER_UPDATE_H_
