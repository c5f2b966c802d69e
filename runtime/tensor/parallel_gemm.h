// ParallelGemm: Gemm (runtime/tensor/blas.h) with the output cut into row
// or column blocks, one per ParallelFor chunk, each a single-threaded
// OpenBLAS call. For the small and skinny GEMMs of a training step this
// beats OpenBLAS's own threading, which pays for packing and hand-over on
// every call. The inner (k) dimension is never split, so each output
// element is one GEMM's dot product. Thread-safe like Gemm.
#ifndef KUBETRAIN_RUNTIME_TENSOR_PARALLEL_GEMM_H_
#define KUBETRAIN_RUNTIME_TENSOR_PARALLEL_GEMM_H_

#include <cstdint>

#include "runtime/tensor/blas.h"

namespace kubetrain {

void ParallelGemm(Trans trans_a, Trans trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                  int64_t ldc);

}  // namespace kubetrain

#endif  // KUBETRAIN_RUNTIME_TENSOR_PARALLEL_GEMM_H_
