#include "runtime/tensor/blas.h"

#include <cblas.h>
#include <sched.h>

#include <thread>

#include "runtime/tensor/parallel_for.h"

namespace kubetrain {

void Gemm(Trans trans_a, Trans trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
          int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a == Trans::kYes ? CblasTrans : CblasNoTrans,
              trans_b == Trans::kYes ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b,
              static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

int AvailableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  unsigned hc = std::thread::hardware_concurrency();
  return hc > 0 ? static_cast<int>(hc) : 1;
}

void SetBlasThreads(int n) {
  const int threads = n > 0 ? n : AvailableCpus();
  openblas_set_num_threads(threads);
  SetComputeThreads(threads);
}

int BlasThreads() { return openblas_get_num_threads(); }

}  // namespace kubetrain
