// CUDA runtime and cuBLAS access. Compiled only when KUBETRAIN_WITH_CUDA is
// ON; callers outside runtime/tensor go through device.h.
// Functions are thread-safe (the CUDA runtime is).
#ifndef KUBETRAIN_RUNTIME_TENSOR_CUDA_CUDA_RUNTIME_H_
#define KUBETRAIN_RUNTIME_TENSOR_CUDA_CUDA_RUNTIME_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/tensor/blas.h"
#include "runtime/tensor/device.h"

namespace kubetrain::cuda {

// The GPUs the CUDA runtime can see, or Unavailable with the driver's
// reason (no driver, no device, ...).
absl::StatusOr<std::vector<DeviceInfo>> ListCudaDevices();

// Row-major C = alpha * op(A) * op(B) + beta * C on GPU `device` with
// cuBLAS, for operands in host memory (copies in and out). Used to check
// the GPU path against the CPU one.
absl::Status GemmOnDevice(int device, Trans trans_a, Trans trans_b, int64_t m, int64_t n, int64_t k,
                          float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                          float beta, float* c, int64_t ldc);

}  // namespace kubetrain::cuda

#endif  // KUBETRAIN_RUNTIME_TENSOR_CUDA_CUDA_RUNTIME_H_
