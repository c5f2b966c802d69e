#include "runtime/tensor/parallel_gemm.h"

#include <cblas.h>

#include <algorithm>

#include "runtime/tensor/parallel_for.h"

namespace kubetrain {
namespace {

// Blocks narrower than this run slower than one thread doing both.
constexpr int64_t kMinBlock = 32;
// Below this many multiply-adds a GEMM is not worth splitting.
constexpr int64_t kMinSplitWork = int64_t{1} << 20;

}  // namespace

void ParallelGemm(Trans trans_a, Trans trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                  int64_t ldc) {
  if (m * n * k < kMinSplitWork) {
    // One thread, OpenBLAS's included: waking its workers for this little
    // work costs more than it saves, and they would then spin beside the
    // ParallelFor pool.
    const int blas = openblas_get_num_threads();
    if (blas != 1) openblas_set_num_threads(1);
    Gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (blas != 1) openblas_set_num_threads(blas);
    return;
  }
  // One block per thread: smaller GEMMs would run slower.
  const int64_t threads = ComputeThreads();
  if (m >= n) {
    // Row blocks of C: rows of op(A).
    ParallelFor(m, std::max(kMinBlock, (m + threads - 1) / threads),
                [&](int, int64_t begin, int64_t end) {
                  const float* ab = trans_a == Trans::kNo ? a + begin * lda : a + begin;
                  Gemm(trans_a, trans_b, end - begin, n, k, alpha, ab, lda, b, ldb, beta,
                       c + begin * ldc, ldc);
                });
  } else {
    // Column blocks of C: columns of op(B).
    ParallelFor(
        n, std::max(kMinBlock, (n + threads - 1) / threads), [&](int, int64_t begin, int64_t end) {
          const float* bb = trans_b == Trans::kNo ? b + begin : b + begin * ldb;
          Gemm(trans_a, trans_b, m, end - begin, k, alpha, a, lda, bb, ldb, beta, c + begin, ldc);
        });
  }
}

}  // namespace kubetrain
