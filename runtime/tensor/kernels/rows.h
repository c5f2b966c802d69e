// Row broadcasts over row-major matrices, for bias terms; host/device
// kernels (host_device.h) over the element range [begin, end).
// Pure functions: thread-safe for disjoint ranges.
#ifndef KUBETRAIN_RUNTIME_TENSOR_KERNELS_ROWS_H_
#define KUBETRAIN_RUNTIME_TENSOR_KERNELS_ROWS_H_

#include <cstdint>

#include "runtime/tensor/kernels/host_device.h"

namespace kubetrain::kernels {

// y{rows, cols}[e] = row[e % cols] for the flat elements e in [begin, end).
KT_HOST_DEVICE inline void BroadcastRows(int64_t begin, int64_t end, const float* row, int64_t cols,
                                         float* y) {
  for (int64_t e = begin; e < end; ++e) y[e] = row[e % cols];
}

// out[j] = sum over i of x{rows, cols}[i, j] for the columns j in
// [begin, end), summed in row order from 0.
KT_HOST_DEVICE inline void SumRows(int64_t begin, int64_t end, const float* x, int64_t rows,
                                   int64_t cols, float* out) {
  for (int64_t j = begin; j < end; ++j) {
    float s = 0.0f;
    for (int64_t i = 0; i < rows; ++i) s += x[i * cols + j];
    out[j] = s;
  }
}

// y[i] = a[i] * b[i].
KT_HOST_DEVICE inline void Multiply(int64_t begin, int64_t end, const float* a, const float* b,
                                    float* y) {
  for (int64_t i = begin; i < end; ++i) y[i] = a[i] * b[i];
}

// x[i] *= s.
KT_HOST_DEVICE inline void Scale(int64_t begin, int64_t end, float s, float* x) {
  for (int64_t i = begin; i < end; ++i) x[i] *= s;
}

}  // namespace kubetrain::kernels

#endif  // KUBETRAIN_RUNTIME_TENSOR_KERNELS_ROWS_H_
