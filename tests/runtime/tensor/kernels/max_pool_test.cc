#include "runtime/tensor/kernels/max_pool.h"

#include <vector>

#include "gtest/gtest.h"

namespace kubetrain::kernels {
namespace {

// Two 4x4 images with 2 channels, 2x2 windows, stride 2.
constexpr MaxPoolGeometry kGeometry{4, 4, 2, 2, 2, 2, 2};

std::vector<float> Images() {
  std::vector<float> x(2 * 32);
  for (int i = 0; i < 64; ++i) x[i] = static_cast<float>((i * 37) % 23) - 11.0f;
  return x;
}

TEST(MaxPoolKernel, ForwardTakesEachWindowsMaximumAndItsOffset) {
  const std::vector<float> x = Images();
  std::vector<float> y(16, 99.0f);
  std::vector<int32_t> am(16, -1);
  MaxPoolForward(kGeometry, 1, 2, x.data(), y.data(), am.data());  // second image only
  EXPECT_EQ(y[0], 99.0f);
  for (int oh = 0; oh < 2; ++oh) {
    for (int ow = 0; ow < 2; ++ow) {
      for (int c = 0; c < 2; ++c) {
        float best = -1e9f;
        int32_t at = -1;
        for (int kh = 0; kh < 2; ++kh) {
          for (int kw = 0; kw < 2; ++kw) {
            const int32_t off = ((oh * 2 + kh) * 4 + ow * 2 + kw) * 2 + c;
            if (x[32 + off] > best) {
              best = x[32 + off];
              at = off;
            }
          }
        }
        const int o = 8 + (oh * 2 + ow) * 2 + c;
        EXPECT_EQ(y[o], best) << o;
        EXPECT_EQ(am[o], at) << o;
      }
    }
  }
}

TEST(MaxPoolKernel, TiesGoToTheFirstInput) {
  const std::vector<float> x(32, 1.0f);
  std::vector<float> y(8);
  std::vector<int32_t> am(8);
  MaxPoolForward(kGeometry, 0, 1, x.data(), y.data(), am.data());
  EXPECT_EQ(am[0], 0);  // (0, 0), channel 0
  EXPECT_EQ(am[1], 1);  // (0, 0), channel 1
  EXPECT_EQ(am[2], 4);  // window (0, 1) starts at column 2
}

TEST(MaxPoolKernel, BackwardRoutesGradientsToTheArgmaxAndZeroesTheRest) {
  const std::vector<float> x = Images();
  std::vector<float> y(16);
  std::vector<int32_t> am(16);
  MaxPoolForward(kGeometry, 0, 2, x.data(), y.data(), am.data());
  std::vector<float> gy(16);
  for (int i = 0; i < 16; ++i) gy[i] = static_cast<float>(i + 1);
  std::vector<float> gx(64, 5.0f);
  MaxPoolBackward(kGeometry, 0, 2, gy.data(), am.data(), gx.data());
  float total = 0;
  for (int b = 0; b < 2; ++b) {
    for (int i = 0; i < 8; ++i) EXPECT_EQ(gx[b * 32 + am[b * 8 + i]], gy[b * 8 + i]);
  }
  for (float g : gx) total += g;
  EXPECT_EQ(total, 136.0f);  // 1 + ... + 16: nothing else survived
}

// The one-element-per-thread versions a GPU runs give the per-image
// kernels' exact bits, with overlapping windows (stride < size) and
// windows that leave the last row and column out.
TEST(MaxPoolKernel, ElementKernelsEqualTheImageKernels) {
  for (const MaxPoolGeometry g :
       {MaxPoolGeometry{5, 5, 3, 4, 4, 2, 1}, MaxPoolGeometry{5, 5, 3, 2, 2, 2, 2},
        MaxPoolGeometry{6, 6, 2, 2, 2, 3, 2}}) {
    const int64_t images = 3;
    std::vector<float> x(images * g.in_image());
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 53) % 29) - 14.0f;
    std::vector<float> y1(images * g.out_image()), y2(y1.size());
    std::vector<int32_t> a1(y1.size()), a2(y1.size());
    MaxPoolForward(g, 0, images, x.data(), y1.data(), a1.data());
    MaxPoolForwardElements(g, 0, 7, x.data(), y2.data(), a2.data());
    MaxPoolForwardElements(g, 7, static_cast<int64_t>(y2.size()), x.data(), y2.data(), a2.data());
    EXPECT_EQ(y1, y2);
    EXPECT_EQ(a1, a2);
    std::vector<float> gy(y1.size());
    for (size_t i = 0; i < gy.size(); ++i) gy[i] = 0.1f * static_cast<float>(i % 13) - 0.6f;
    std::vector<float> gx1(x.size()), gx2(x.size(), 99.0f);
    MaxPoolBackward(g, 0, images, gy.data(), a1.data(), gx1.data());
    MaxPoolBackwardElements(g, 0, static_cast<int64_t>(gx2.size()), gy.data(), a1.data(),
                            gx2.data());
    EXPECT_EQ(gx1, gx2);
  }
}

}  // namespace
}  // namespace kubetrain::kernels
