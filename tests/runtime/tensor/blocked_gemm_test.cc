#include "runtime/tensor/blocked_gemm.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/tensor/blas.h"
#include "runtime/tensor/parallel_for.h"

namespace kubetrain {
namespace {

struct Case {
  Trans ta, tb;
  int64_t m, n, k;
  GemmEpilogue e;
};

// Naive reference in double: relu?(alpha * op(A) op(B) + beta * C + bias).
std::vector<float> Reference(const Case& t, const std::vector<float>& a,
                             const std::vector<float>& b, const std::vector<float>& bias,
                             std::vector<float> c) {
  for (int64_t i = 0; i < t.m; ++i) {
    for (int64_t j = 0; j < t.n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < t.k; ++p) {
        const float av = t.ta == Trans::kNo ? a[i * t.k + p] : a[p * t.m + i];
        const float bv = t.tb == Trans::kNo ? b[p * t.n + j] : b[j * t.k + p];
        s += static_cast<double>(av) * bv;
      }
      double v = t.e.alpha * s;
      if (t.e.beta != 0.0f) v += t.e.beta * c[i * t.n + j];
      if (t.e.column_bias != nullptr) v += bias[j];
      if (t.e.relu) v = std::max(v, 0.0);
      c[i * t.n + j] = static_cast<float>(v);
    }
  }
  return c;
}

struct Operands {
  std::vector<float> a, b, bias, c;
};

Operands Random(const Case& t, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> d(-1, 1);
  Operands o{std::vector<float>(static_cast<size_t>(t.m * t.k)),
             std::vector<float>(static_cast<size_t>(t.k * t.n)),
             std::vector<float>(static_cast<size_t>(t.n)),
             std::vector<float>(static_cast<size_t>(t.m * t.n))};
  for (auto* v : {&o.a, &o.b, &o.bias, &o.c}) {
    for (float& x : *v) x = d(rng);
  }
  return o;
}

GemmProblem Problem(const Case& t, Operands& o) {
  GemmProblem p{.trans_a = t.ta,
                .trans_b = t.tb,
                .m = t.m,
                .n = t.n,
                .k = t.k,
                .a = o.a.data(),
                .lda = t.ta == Trans::kNo ? t.k : t.m,
                .b = o.b.data(),
                .ldb = t.tb == Trans::kNo ? t.n : t.k,
                .c = o.c.data(),
                .ldc = t.n,
                .epilogue = t.e};
  if (p.epilogue.column_bias != nullptr) p.epilogue.column_bias = o.bias.data();
  return p;
}

// Every test runs with the best kernel and with the AVX2 one.
class BlockedGemmTest : public ::testing::TestWithParam<GemmKernel> {
 protected:
  void SetUp() override {
    if (!BlockedGemmAvailable(GetParam())) {
      GTEST_SKIP() << "this CPU has no "
                   << (GetParam() == GemmKernel::kAvx2 ? "AVX2+FMA" : "AVX-512F or AVX2+FMA");
    }
    saved_ = ComputeThreads();
  }
  void TearDown() override {
    if (saved_ > 0) SetBlasThreads(saved_);
  }
  int saved_ = 0;
};

const float kSomeBias = 0;  // a non-null marker: Problem() points it at the operands' bias

TEST_P(BlockedGemmTest, MatchesAReferenceForEveryLayoutEdgeAndEpilogue) {
  SetBlasThreads(2);
  std::mt19937_64 rng(7);
  // Shapes cover full and partial tiles in both directions, several
  // k-blocks (k > 256), k == 0, a single row and column, and row blocks
  // (m > 512).
  const int64_t shapes[][3] = {{1, 1, 1},      {5, 7, 3},    {12, 32, 256},
                               {13, 33, 257},  {37, 70, 50}, {256, 10, 128},
                               {64, 784, 600}, {600, 40, 9}, {24, 48, 0}};
  const GemmEpilogue epilogues[] = {
      {},
      {.alpha = 0.5f, .beta = 2.0f},
      {.alpha = 1.0f, .beta = 0.0f, .column_bias = &kSomeBias, .relu = true},
      {.alpha = -1.5f, .beta = 1.0f, .column_bias = &kSomeBias},
  };
  for (const auto& s : shapes) {
    for (const GemmEpilogue& e : epilogues) {
      for (Trans ta : {Trans::kNo, Trans::kYes}) {
        for (Trans tb : {Trans::kNo, Trans::kYes}) {
          const Case t{ta, tb, s[0], s[1], s[2], e};
          Operands o = Random(t, rng);
          if (e.beta == 0.0f) std::fill(o.c.begin(), o.c.end(), std::nanf(""));  // never read
          const std::vector<float> want = Reference(t, o.a, o.b, o.bias, o.c);
          const GemmProblem p = Problem(t, o);
          BlockedGemm({&p, 1}, GetParam());
          for (size_t i = 0; i < o.c.size(); ++i) {
            ASSERT_NEAR(o.c[i], want[i],
                        2e-5f * (1 + std::sqrt(static_cast<float>(t.k))) * (1 + std::abs(want[i])))
                << t.m << "x" << t.n << "x" << t.k << " ta=" << (ta == Trans::kYes)
                << " tb=" << (tb == Trans::kYes) << " alpha=" << e.alpha << " beta=" << e.beta
                << " relu=" << e.relu << " at " << i;
          }
        }
      }
    }
  }
}

TEST_P(BlockedGemmTest, RunsSeveralProblemsInOneCall) {
  SetBlasThreads(2);
  std::mt19937_64 rng(3);
  // A dense layer's backward: dW = dY^T X and dX = dY W together.
  const Case dw{Trans::kYes, Trans::kNo, 128, 256, 64, {}};
  const Case dx{Trans::kNo, Trans::kNo, 64, 256, 128, {}};
  Operands odw = Random(dw, rng), odx = Random(dx, rng);
  const std::vector<float> want_dw = Reference(dw, odw.a, odw.b, odw.bias, odw.c);
  const std::vector<float> want_dx = Reference(dx, odx.a, odx.b, odx.bias, odx.c);
  const GemmProblem problems[] = {Problem(dw, odw), Problem(dx, odx)};
  BlockedGemm(problems, GetParam());
  for (size_t i = 0; i < want_dw.size(); ++i) ASSERT_NEAR(odw.c[i], want_dw[i], 1e-4f) << i;
  for (size_t i = 0; i < want_dx.size(); ++i) ASSERT_NEAR(odx.c[i], want_dx[i], 1e-4f) << i;
}

TEST_P(BlockedGemmTest, GivesTheSameBitsForAnyThreadCount) {
  std::mt19937_64 rng(11);
  const Case t{Trans::kNo, Trans::kYes, 700, 300, 784, {.column_bias = &kSomeBias, .relu = true}};
  const Operands base = Random(t, rng);
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3}) {
    SetBlasThreads(threads);
    Operands o = base;
    const GemmProblem p = Problem(t, o);
    BlockedGemm({&p, 1}, GetParam());
    results.push_back(o.c);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

INSTANTIATE_TEST_SUITE_P(Kernels, BlockedGemmTest,
                         ::testing::Values(GemmKernel::kBest, GemmKernel::kAvx2),
                         [](const ::testing::TestParamInfo<GemmKernel>& info) {
                           return std::string(info.param == GemmKernel::kBest ? "Best" : "Avx2");
                         });

TEST(BlockedGemmKernel, NamesTheKernelInUse) {
  const std::string k = BlockedGemmKernel();
  EXPECT_TRUE(k == "avx512" || k == "avx2" || k == "none") << k;
  EXPECT_EQ(BlockedGemmAvailable(), k != "none");
}

}  // namespace
}  // namespace kubetrain
