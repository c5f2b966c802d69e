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
KT_HOST_DEVICE inline void SgdUpdate(const SgdParams& o, int64_t begin, int64_t end, float* p,
                                     const float* g, float* v) {
  if (o.momentum == 0.0f) {
    for (int64_t i = begin; i < end; ++i) p[i] -= o.lr * (g[i] + o.weight_decay * p[i]);
    return;
  }
  for (int64_t i = begin; i < end; ++i) {
    const float d = g[i] + o.weight_decay * p[i];
    v[i] = o.momentum * v[i] + d;
    p[i] -= o.lr * (o.nesterov ? d + o.momentum * v[i] : v[i]);
  }
}

struct AdamParams {
  float step = 0;  // lr * sqrt(1 - beta2^t) / (1 - beta1^t)
  float beta1 = 0, beta2 = 0, weight_decay = 0;
  float epsilon = 0;  // epsilon * sqrt(1 - beta2^t)
};

KT_HOST_DEVICE inline void AdamUpdate(const AdamParams& o, int64_t begin, int64_t end, float* p,
                                      const float* g, float* m, float* v) {
  for (int64_t i = begin; i < end; ++i) {
    const float d = g[i] + o.weight_decay * p[i];
    m[i] = o.beta1 * m[i] + (1.0f - o.beta1) * d;
    v[i] = o.beta2 * v[i] + (1.0f - o.beta2) * d * d;
    p[i] -= o.step * m[i] / (sqrtf(v[i]) + o.epsilon);
  }
}

}  // namespace kubetrain::kernels

#endif  // KUBETRAIN_RUNTIME_TENSOR_KERNELS_OPTIMIZER_UPDATE_H_
