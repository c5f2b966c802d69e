// The host/device kernels of runtime/tensor/kernels/, compiled for the
// host: the same source the CUDA device runs one element per thread.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/tensor/cpu_device.h"
#include "runtime/tensor/kernels/dropout_mask.h"
#include "runtime/tensor/kernels/im2col.h"
#include "runtime/tensor/kernels/optimizer_update.h"
#include "runtime/tensor/kernels/rows.h"
#include "runtime/tensor/kernels/softmax_cross_entropy.h"

namespace kubetrain::kernels {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// 2 images 5x4x3, 3x3 kernel, stride 2, padding 1 -> 3x2 outputs.
constexpr ConvShape kShape{5, 4, 3, 3, 2, 3, 2, 1};

TEST(Im2ColKernel, CopiesEachPatchValueOrZeroOutsideTheImage) {
  const std::vector<float> x = Random(2 * kShape.in_image(), 1);
  const int64_t rows = 2 * kShape.pixels(), patch = kShape.patch();
  std::vector<float> col(rows * patch, 99.0f);
  Im2Col(kShape, 0, rows * patch, x.data(), col.data());
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t oh = 0; oh < 3; ++oh) {
      for (int64_t ow = 0; ow < 2; ++ow) {
        for (int64_t kh = 0; kh < 3; ++kh) {
          for (int64_t kw = 0; kw < 3; ++kw) {
            for (int64_t c = 0; c < 3; ++c) {
              const int64_t ih = oh * 2 - 1 + kh, iw = ow * 2 - 1 + kw;
              const float want =
                  ih < 0 || ih >= 5 || iw < 0 || iw >= 4 ? 0.0f : x[b * 60 + (ih * 4 + iw) * 3 + c];
              const int64_t row = b * 6 + oh * 2 + ow;
              EXPECT_EQ(col[row * patch + (kh * 3 + kw) * 3 + c], want);
            }
          }
        }
      }
    }
  }
}

TEST(Im2ColKernel, Col2ImEqualsTheScatterOfEveryPatchInOutputOrder) {
  const int64_t rows = 2 * kShape.pixels(), patch = kShape.patch();
  const std::vector<float> dcol = Random(rows * patch, 2);
  // The reference: conv2d.cc's CPU col2im, a scatter over (oh, ow, kh, kw).
  std::vector<float> want(2 * kShape.in_image(), 0.0f);
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t b = row / 6, oh = (row % 6) / 2, ow = row % 2;
    for (int64_t kh = 0; kh < 3; ++kh) {
      for (int64_t kw = 0; kw < 3; ++kw) {
        const int64_t ih = oh * 2 - 1 + kh, iw = ow * 2 - 1 + kw;
        if (ih < 0 || ih >= 5 || iw < 0 || iw >= 4) continue;
        for (int64_t c = 0; c < 3; ++c) {
          want[b * 60 + (ih * 4 + iw) * 3 + c] += dcol[row * patch + (kh * 3 + kw) * 3 + c];
        }
      }
    }
  }
  std::vector<float> got(want.size(), 99.0f);
  // Any split of the range gives the same bits.
  Col2Im(kShape, 0, 50, dcol.data(), got.data());
  Col2Im(kShape, 50, static_cast<int64_t>(got.size()), dcol.data(), got.data());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << i;
}

TEST(DropoutKernel, MaskDependsOnlyOnSeedCallAndIndex) {
  const int64_t n = 20000;
  const std::vector<float> x = Random(n, 3);
  const DropoutParams p = MakeDropoutParams(42, 3, 0.25f);
  std::vector<float> m1(n), y1(n), m2(n), y2(n);
  DropoutForward(p, 0, n, x.data(), m1.data(), y1.data());
  DropoutForward(p, 0, 777, x.data(), m2.data(), y2.data());
  DropoutForward(p, 777, n, x.data(), m2.data(), y2.data());
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(m1[i], m2[i]);
    ASSERT_TRUE(m1[i] == 0.0f || m1[i] == 1.0f / 0.75f) << m1[i];
    EXPECT_EQ(y1[i], x[i] * m1[i]);
    kept += m1[i] != 0.0f;
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.75, 0.02);
  const DropoutParams other = MakeDropoutParams(42, 4, 0.25f);
  std::vector<float> m3(n), y3(n);
  DropoutForward(other, 0, n, x.data(), m3.data(), y3.data());
  EXPECT_NE(m1, m3) << "the next call draws a new mask";
}

TEST(SoftmaxCrossEntropyKernel, MatchesTheDefinition) {
  const std::vector<float> z = {1.0f, -2.0f, 0.5f, 3.0f};
  std::vector<float> g(4);
  bool correct = true;
  const double loss = SoftmaxCrossEntropyRow(z.data(), 4, 2, 8.0, g.data(), &correct);
  double sum = 0;
  for (float v : z) sum += std::exp(static_cast<double>(v));
  EXPECT_NEAR(loss, -std::log(std::exp(0.5) / sum), 1e-12);
  EXPECT_FALSE(correct);  // arg-max is 3
  for (int j = 0; j < 4; ++j) {
    const double p = std::exp(static_cast<double>(z[j])) / sum;
    EXPECT_NEAR(g[j], (p - (j == 2 ? 1.0 : 0.0)) / 8.0, 1e-7) << j;
  }
  EXPECT_NEAR(SoftmaxCrossEntropyRow(z.data(), 4, 3, 1.0, nullptr, &correct),
              -std::log(std::exp(3.0) / sum), 1e-12);
  EXPECT_TRUE(correct);
}

TEST(OptimizerKernels, SgdWithMomentumAndAdamFollowTheirFormulas) {
  const std::vector<float> g = Random(64, 4);
  std::vector<float> p = Random(64, 5), v(64, 0.5f);
  const std::vector<float> p0 = p, v0 = v;
  const SgdParams s{.lr = 0.1f, .weight_decay = 0.01f, .momentum = 0.9f, .nesterov = true};
  SgdUpdate(s, 0, 64, p.data(), g.data(), v.data());
  for (int i = 0; i < 64; ++i) {
    const float d = g[i] + 0.01f * p0[i];
    const float vn = 0.9f * v0[i] + d;
    EXPECT_FLOAT_EQ(v[i], vn);
    EXPECT_FLOAT_EQ(p[i], p0[i] - 0.1f * (d + 0.9f * vn));
  }
  std::vector<float> q = p0, m(64, 0.1f), w(64, 0.2f);
  const AdamParams a{
      .step = 0.01f, .beta1 = 0.9f, .beta2 = 0.99f, .weight_decay = 0.0f, .epsilon = 1e-6f};
  AdamUpdate(a, 0, 64, q.data(), g.data(), m.data(), w.data());
  // In double: the kernel's fused multiply-adds round once where the plain
  // float expression rounds twice, so each value is within a few float
  // roundings of its largest term (m and v cancel: 0.09 against 0.1 * g).
  for (int i = 0; i < 64; ++i) {
    const double gi = g[i];
    const double mn = 0.9 * 0.1 + (1.0 - 0.9) * gi;
    const double wn = 0.99 * 0.2 + (1.0 - 0.99) * gi * gi;
    EXPECT_NEAR(m[i], mn, 4e-8);
    EXPECT_NEAR(w[i], wn, 4e-8);
    EXPECT_NEAR(q[i], p0[i] - 0.01 * mn / (std::sqrt(wn) + 1e-6), 4e-7);
  }
}

TEST(OptimizerKernels, EveryBuildOfTheUpdateGivesTheSameBits) {
  constexpr int64_t kN = 10007;
  CpuDevice cpu;
  for (const bool nesterov : {false, true}) {
    const SgdParams s{.lr = 0.05f,
                      .weight_decay = 1e-3f,
                      .momentum = 0.9f,
                      .nesterov = nesterov,
                      .grad_scale = 1.0f / 3};
    std::vector<float> p1 = Random(kN, 7), p2 = p1, v1(kN, 0.0f), v2(kN, 0.0f);
    for (uint32_t step = 0; step < 5; ++step) {
      const std::vector<float> g = Random(kN, 100 + step);
      SgdUpdate(s, 0, kN, p1.data(), g.data(), v1.data());
      cpu.SgdUpdate(s, p2.data(), g.data(), v2.data(), kN);
    }
    EXPECT_EQ(std::memcmp(p1.data(), p2.data(), kN * sizeof(float)), 0) << "nesterov " << nesterov;
    EXPECT_EQ(std::memcmp(v1.data(), v2.data(), kN * sizeof(float)), 0) << "nesterov " << nesterov;
  }
  const AdamParams a{.step = 1e-3f,
                     .beta1 = 0.9f,
                     .beta2 = 0.999f,
                     .weight_decay = 1e-2f,
                     .epsilon = 1e-8f,
                     .grad_scale = 0.5f};
  std::vector<float> q1 = Random(kN, 8), q2 = q1, m1(kN, 0.0f), m2(kN, 0.0f), w1(kN, 0.0f),
                     w2(kN, 0.0f);
  for (uint32_t step = 0; step < 5; ++step) {
    const std::vector<float> g = Random(kN, 200 + step);
    AdamUpdate(a, 0, kN, q1.data(), g.data(), m1.data(), w1.data());
    cpu.AdamUpdate(a, q2.data(), g.data(), m2.data(), w2.data(), kN);
  }
  EXPECT_EQ(std::memcmp(q1.data(), q2.data(), kN * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(m1.data(), m2.data(), kN * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(w1.data(), w2.data(), kN * sizeof(float)), 0);
}

TEST(RowKernels, BroadcastAndColumnSums) {
  const std::vector<float> row = {1, 2, 3};
  std::vector<float> y(12);
  BroadcastRows(0, 12, row.data(), 3, y.data());
  for (int i = 0; i < 12; ++i) EXPECT_EQ(y[i], row[i % 3]);
  const std::vector<float> x = Random(5 * 3, 6);
  std::vector<float> s(3);
  SumRows(0, 3, x.data(), 5, 3, s.data());
  for (int j = 0; j < 3; ++j) {
    float want = 0;
    for (int i = 0; i < 5; ++i) want += x[i * 3 + j];
    EXPECT_EQ(s[j], want);
  }
}

}  // namespace
}  // namespace kubetrain::kernels
