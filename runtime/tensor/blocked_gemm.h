// BlockedGemm: the CPU backend's own single-precision GEMM for the dense
// layers' shapes, with the layer's bias and ReLU fused into the store of
// each output tile, and several GEMMs (a layer's dW and dX) run in one
// ParallelFor region. OpenBLAS (blas.h) is called once per GEMM and packs
// both operands on every call; here op(B) is copied into panels NR columns
// wide and k-blocks deep that stay in L1 while every row of op(A) is
// multiplied by them, and op(A) is read where it lies (no packing). The
// micro-kernels are written for AVX-512F (12 x 32 tiles) and AVX2 with FMA
// (6 x 16), chosen once by the CPU's features; BlockedGemmAvailable() is
// false on other CPUs and callers use Gemm/ParallelGemm there.
//
// Work is split into tasks of one NR-column panel and a block of rows; each
// output element is summed by one thread in k order, k-block by k-block, so
// the result does not depend on the thread count or the timing.
// Thread-safe: the problems' buffers are the only state.
#ifndef KUBETRAIN_RUNTIME_TENSOR_BLOCKED_GEMM_H_
#define KUBETRAIN_RUNTIME_TENSOR_BLOCKED_GEMM_H_

#include <cstdint>
#include <span>

#include "runtime/tensor/blas.h"

namespace kubetrain {

// What is done to each output element once its sum is complete:
// c = relu?(alpha * sum + beta * c + column_bias[j]).
struct GemmEpilogue {
  float alpha = 1.0f;
  float beta = 0.0f;                   // c is not read when 0 (it may hold anything)
  const float* column_bias = nullptr;  // n values, one per column; none when null
  bool relu = false;
};

// Row-major C[m x n] = op(A)[m x k] * op(B)[k x n] (blas.h conventions),
// finished by `epilogue`. m, n > 0; k >= 0 (k == 0: the sum is 0).
struct GemmProblem {
  Trans trans_a = Trans::kNo;
  Trans trans_b = Trans::kNo;
  int64_t m = 0, n = 0, k = 0;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  float* c = nullptr;
  int64_t ldc = 0;
  GemmEpilogue epilogue;
};

// Which micro-kernel: the best this CPU has, or (for tests on AVX-512
// machines) the AVX2 one.
enum class GemmKernel { kBest, kAvx2 };

// Whether this CPU has the micro-kernel (kBest: AVX-512F, or AVX2 and FMA).
bool BlockedGemmAvailable(GemmKernel kernel = GemmKernel::kBest);

// Name of the micro-kernel kBest picks: "avx512", "avx2" or "none".
const char* BlockedGemmKernel();

// Runs every problem, their tasks together in one ParallelFor region.
// Problems must not write what another reads or writes. Requires
// BlockedGemmAvailable(kernel).
void BlockedGemm(std::span<const GemmProblem> problems, GemmKernel kernel = GemmKernel::kBest);

}  // namespace kubetrain

#endif  // KUBETRAIN_RUNTIME_TENSOR_BLOCKED_GEMM_H_
