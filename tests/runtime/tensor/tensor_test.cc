#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/tensor/blas.h"
#include "runtime/tensor/flat_buffer.h"

namespace kubetrain {
namespace {

TEST(FlatParameters, ViewsShareTheTwoFlatBuffers) {
  FlatParameters flat;
  const int a = flat.Reserve("a", {3, 5});
  const int b = flat.Reserve("b", {7});
  flat.Allocate();
  EXPECT_EQ(flat.entries()[a].offset, 0);
  EXPECT_EQ(flat.entries()[b].offset, 16);  // padded to 64 bytes
  EXPECT_EQ(flat.size(), 23);
  TensorView pa = flat.Param(a), gb = flat.Grad(b);
  pa[4] = 2.5f;
  gb[6] = -1.0f;
  EXPECT_EQ(flat.params()[4], 2.5f);
  EXPECT_EQ(flat.grads()[22], -1.0f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(flat.Param(b).data()) % 64, 0u);
}

TEST(Blas, GemmMatchesANaiveProductForEveryTransposition) {
  const int64_t m = 5, n = 4, k = 3;
  std::vector<float> a(m * k), b(k * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) - 3;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) - 2;
  std::vector<float> want(m * n, 0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) want[i * n + j] += a[i * k + p] * b[p * n + j];
  // Transposed copies of A and B.
  std::vector<float> at(k * m), bt(n * k);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) at[p * m + i] = a[i * k + p];
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) bt[j * k + p] = b[p * n + j];
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      std::vector<float> c(m * n, 1.0f);
      Gemm(ta ? Trans::kYes : Trans::kNo, tb ? Trans::kYes : Trans::kNo, m, n, k, 1.0f,
           ta ? at.data() : a.data(), ta ? m : k, tb ? bt.data() : b.data(), tb ? k : n, 0.0f,
           c.data(), n);
      EXPECT_EQ(c, want) << "ta=" << ta << " tb=" << tb;
    }
  }
}

TEST(Blas, ThreadCountFollowsTheCpus) {
  EXPECT_GE(AvailableCpus(), 1);
  SetBlasThreads(0);
  EXPECT_EQ(BlasThreads(), AvailableCpus());
  SetBlasThreads(1);
  EXPECT_EQ(BlasThreads(), 1);
}

}  // namespace
}  // namespace kubetrain
