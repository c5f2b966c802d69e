// Row-major single-precision GEMM and BLAS thread control, over OpenBLAS.
// Gemm is thread-safe (OpenBLAS parallelises internally); SetBlasThreads
// changes process-wide OpenBLAS state and belongs in main().
#ifndef KUBETRAIN_RUNTIME_TENSOR_BLAS_H_
#define KUBETRAIN_RUNTIME_TENSOR_BLAS_H_

#include <cstdint>

namespace kubetrain {

enum class Trans { kNo, kYes };

// C[m x n] = alpha * op(A)[m x k] * op(B)[k x n] + beta * C, all row-major.
// lda/ldb/ldc are the row strides of A, B and C as stored.
void Gemm(Trans trans_a, Trans trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
          int64_t ldc);

// Number of CPUs this process may run on (sched affinity aware), >= 1.
int AvailableCpus();

// Sets OpenBLAS's thread count and ParallelFor's (runtime/tensor/parallel_for.h);
// n <= 0 means AvailableCpus().
void SetBlasThreads(int n);
int BlasThreads();

}  // namespace kubetrain

#endif  // KUBETRAIN_RUNTIME_TENSOR_BLAS_H_
