// ReLU forward and backward over the index range [begin, end) of flat
// arrays; host/device kernels (runtime/tensor/kernels/host_device.h).
// Pure functions: thread-safe for disjoint ranges.
#ifndef KUBETRAIN_RUNTIME_TENSOR_KERNELS_RELU_H_
#define KUBETRAIN_RUNTIME_TENSOR_KERNELS_RELU_H_

#include <cstdint>

#include "runtime/tensor/kernels/host_device.h"

namespace kubetrain::kernels {

// y[i] = std::max(x[i], 0.0f): NaN passes through, as it does there.
KT_HOST_DEVICE inline void ReluForward(int64_t begin, int64_t end, const float* x, float* y) {
  for (int64_t i = begin; i < end; ++i) {
    const float v = x[i];
    y[i] = v < 0.0f ? 0.0f : v;
  }
}

// gx[i] = gy[i] where x[i] > 0, else 0.
KT_HOST_DEVICE inline void ReluBackward(int64_t begin, int64_t end, const float* x, const float* gy,
                                        float* gx) {
  // Both loads unconditional, so that the loop vectorises.
  for (int64_t i = begin; i < end; ++i) {
    const float g = gy[i];
    gx[i] = x[i] > 0.0f ? g : 0.0f;
  }
}

}  // namespace kubetrain::kernels

#endif  // KUBETRAIN_RUNTIME_TENSOR_KERNELS_RELU_H_
