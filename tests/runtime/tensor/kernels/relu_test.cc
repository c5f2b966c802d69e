#include "runtime/tensor/kernels/relu.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace kubetrain::kernels {
namespace {

TEST(ReluKernel, ForwardClipsNegativesAndKeepsNaNOnlyInItsRange) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {-2.0f, -0.0f, 0.0f, 3.0f, nan, -1.0f};
  std::vector<float> y(x.size(), 7.0f);
  ReluForward(1, 5, x.data(), y.data());
  EXPECT_EQ(y[0], 7.0f);  // outside [1, 5)
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[3], 3.0f);
  EXPECT_TRUE(std::isnan(y[4]));  // as std::max(x, 0.0f)
  EXPECT_EQ(y[5], 7.0f);
}

TEST(ReluKernel, BackwardPassesGradientWhereInputIsPositive) {
  const std::vector<float> x = {-1.0f, 0.0f, 2.0f, 5.0f};
  const std::vector<float> gy = {10.0f, 20.0f, 30.0f, 40.0f};
  std::vector<float> gx(4, -1.0f);
  ReluBackward(0, 4, x.data(), gy.data(), gx.data());
  EXPECT_EQ(gx, (std::vector<float>{0.0f, 0.0f, 30.0f, 40.0f}));
}

TEST(ReluKernel, InPlaceForwardIsAllowed) {
  std::vector<float> v = {-1.0f, 1.0f};
  ReluForward(0, 2, v.data(), v.data());
  EXPECT_EQ(v, (std::vector<float>{0.0f, 1.0f}));
}

}  // namespace
}  // namespace kubetrain::kernels
