#include "runtime/tensor/parallel_gemm.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/tensor/blas.h"
#include "runtime/tensor/parallel_for.h"

namespace kubetrain {
namespace {

// Naive row-major reference.
std::vector<float> Reference(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                             const std::vector<float>& a, const std::vector<float>& b, float beta,
                             std::vector<float> c) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        const float av = ta == Trans::kNo ? a[i * k + p] : a[p * m + i];
        const float bv = tb == Trans::kNo ? b[p * n + j] : b[j * k + p];
        s += static_cast<double>(av) * bv;
      }
      c[i * n + j] = static_cast<float>(alpha * s + beta * c[i * n + j]);
    }
  }
  return c;
}

TEST(ParallelGemm, MatchesAReferenceForEveryTransposeAndSplit) {
  const int saved = ComputeThreads();
  SetBlasThreads(2);
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  // Tall (row split), wide (column split), and too small to split.
  const int64_t shapes[][3] = {{300, 70, 90}, {40, 500, 80}, {5, 6, 7}};
  for (const auto& s : shapes) {
    const int64_t m = s[0], n = s[1], k = s[2];
    for (Trans ta : {Trans::kNo, Trans::kYes}) {
      for (Trans tb : {Trans::kNo, Trans::kYes}) {
        std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)),
            c(static_cast<size_t>(m * n));
        for (float& v : a) v = d(rng);
        for (float& v : b) v = d(rng);
        for (float& v : c) v = d(rng);
        const std::vector<float> want = Reference(ta, tb, m, n, k, 0.5f, a, b, 2.0f, c);
        ParallelGemm(ta, tb, m, n, k, 0.5f, a.data(), ta == Trans::kNo ? k : m, b.data(),
                     tb == Trans::kNo ? n : k, 2.0f, c.data(), n);
        for (size_t i = 0; i < c.size(); ++i) {
          ASSERT_NEAR(c[i], want[i], 1e-4f * (1 + std::abs(want[i])))
              << m << "x" << n << "x" << k << " ta=" << (ta == Trans::kYes)
              << " tb=" << (tb == Trans::kYes) << " at " << i;
        }
      }
    }
  }
  SetBlasThreads(saved);
}

}  // namespace
}  // namespace kubetrain
