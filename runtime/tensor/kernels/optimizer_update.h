// Fused optimizer updates over the parameter range [begin, end): one pass
// reads the gradient and the state and writes the parameter and the state.
// Host/device kernels (host_device.h); the expressions are those of
// runtime/optim/optimizer.cc, so both devices compute the same update.
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
  float grad_scale = 1;  // the gradient is g * grad_scale (1 / world for an allreduce sum)
  // When set, the learning rate is read from here (the same memory as p),
  // not from lr: a captured step's comes from kernels::StepScalars.
  const float* lr_from = nullptr;
};

// Every multiply-add below is an explicit fmaf: compilers contract a * b + c
// into one fused, singly rounded operation where they may (nvcc always, GCC's
// AVX2 and AVX-512 clones), and not where they may not (the baseline x86-64
// build), which gave each device and each CPU clone its own bits. With the
// fusion spelled out, every one of them computes the same update, bit for
// bit (tests/runtime/tensor/kernels, the gpu_parity_test).
//
// d = g * s + wd * p; with momentum v = mu * v + d and p -= lr * (nesterov ?
// d + mu * v : v); without (v unused, may be null) p -= lr * d.
// The options are copied into locals first: stores through p and v may
// alias a float member of `o`, which would keep the loop from vectorising.
KT_HOST_DEVICE inline void SgdUpdate(const SgdParams& o, int64_t begin, int64_t end, float* p,
                                     const float* g, float* v) {
  const float neg_lr = -(o.lr_from != nullptr ? *o.lr_from : o.lr);
  const float wd = o.weight_decay, mu = o.momentum, scale = o.grad_scale;
  const bool nesterov = o.nesterov;
  if (mu == 0.0f) {
    for (int64_t i = begin; i < end; ++i) {
      p[i] = fmaf(neg_lr, fmaf(wd, p[i], g[i] * scale), p[i]);
    }
    return;
  }
  for (int64_t i = begin; i < end; ++i) {
    const float d = fmaf(wd, p[i], g[i] * scale);
    const float vn = fmaf(mu, v[i], d);
    v[i] = vn;
    p[i] = fmaf(neg_lr, nesterov ? fmaf(mu, vn, d) : vn, p[i]);
  }
}

struct AdamParams {
  float step = 0;  // lr * sqrt(1 - beta2^t) / (1 - beta1^t)
  float beta1 = 0, beta2 = 0, weight_decay = 0;
  float epsilon = 0;     // epsilon * sqrt(1 - beta2^t)
  float grad_scale = 1;  // as SgdParams'
  // When set, step and epsilon are read from here ({step, epsilon}: a
  // StepScalars' adam_step and adam_epsilon) instead.
  const float* coefficients_from = nullptr;
};

// d = g * s + wd * p; m = b1 * m + (1 - b1) * d; v = b2 * v + (1 - b2) * d^2;
// p -= step * m / (sqrt(v) + eps), fused as SgdUpdate's.
KT_HOST_DEVICE inline void AdamUpdate(const AdamParams& o, int64_t begin, int64_t end, float* p,
                                      const float* g, float* m, float* v) {
  const float* from = o.coefficients_from;
  const float neg_step = -(from != nullptr ? from[0] : o.step);
  const float eps = from != nullptr ? from[1] : o.epsilon;
  const float b1 = o.beta1, b2 = o.beta2, wd = o.weight_decay;
  const float c1 = 1.0f - b1, c2 = 1.0f - b2, scale = o.grad_scale;
  for (int64_t i = begin; i < end; ++i) {
    const float d = fmaf(wd, p[i], g[i] * scale);
    const float mn = fmaf(b1, m[i], c1 * d);
    const float vn = fmaf(b2, v[i], (c2 * d) * d);
    m[i] = mn;
    v[i] = vn;
    p[i] = fmaf(neg_step, mn / (sqrtf(vn) + eps), p[i]);
  }
}

}  // namespace kubetrain::kernels

#endif  // KUBETRAIN_RUNTIME_TENSOR_KERNELS_OPTIMIZER_UPDATE_H_
