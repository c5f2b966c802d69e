// Finite-difference gradient checks for every layer and the loss: the
// analytic Backward must match (L(x + e) - L(x - e)) / 2e for the scalar
// L = sum(out * R) with a fixed random R, for inputs and parameters.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/nn/activation.h"
#include "runtime/nn/conv2d.h"
#include "runtime/nn/dense.h"
#include "runtime/nn/dropout.h"
#include "runtime/nn/max_pool2d.h"
#include "runtime/nn/softmax_cross_entropy.h"

namespace kubetrain::nn {
namespace {

constexpr float kEps = 1e-2f;

std::vector<float> Random(size_t n, std::mt19937_64& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

struct Harness {
  Harness(Layer& l, Shape s, int64_t b) : layer(l), in_shape(std::move(s)), batch(b) {}

  Layer& layer;
  Shape in_shape;  // per sample
  int64_t batch;
  std::function<void()> before_forward = [] {};

  Shape out_shape;
  FlatParameters flat;
  std::vector<float> x, r;

  void Setup(std::mt19937_64& rng, std::vector<float> input) {
    absl::StatusOr<Shape> s = layer.Build(in_shape);
    ASSERT_TRUE(s.ok()) << s.status();
    out_shape = *s;
    layer.DeclareParams(flat, "p.");
    flat.Allocate();
    layer.BindParams(flat);
    layer.InitParams(rng);
    // Perturb params away from their initial (e.g. zero-bias) values.
    for (float& p : flat.params()) p += std::uniform_real_distribution<float>(-0.3f, 0.3f)(rng);
    x = std::move(input);
    r = Random(static_cast<size_t>(batch * NumElements(out_shape)), rng);
  }

  double Loss() {
    std::vector<float> y(r.size());
    before_forward();
    layer.Forward(TensorView(x.data(), WithBatch(batch, in_shape)),
                  TensorView(y.data(), WithBatch(batch, out_shape)), /*training=*/true);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += static_cast<double>(y[i]) * r[i];
    return l;
  }

  // Runs forward + backward; returns dL/dx; param grads land in flat.grads().
  std::vector<float> Analytic() {
    std::vector<float> y(r.size()), gx(x.size());
    before_forward();
    TensorView in(x.data(), WithBatch(batch, in_shape));
    TensorView out(y.data(), WithBatch(batch, out_shape));
    layer.Forward(in, out, /*training=*/true);
    TensorView gin(gx.data(), in.shape());
    layer.Backward(in, out, TensorView(r.data(), out.shape()), &gin);
    return gx;
  }

  void Check(float* value, float analytic, const std::string& what) {
    const float saved = *value;
    *value = saved + kEps;
    const double lp = Loss();
    *value = saved - kEps;
    const double lm = Loss();
    *value = saved;
    const double numeric = (lp - lm) / (2.0 * kEps);
    const double tol = 5e-3 + 1e-2 * std::max(std::abs(numeric), std::abs(double{analytic}));
    EXPECT_NEAR(analytic, numeric, tol) << what;
  }

  void CheckAll(std::mt19937_64& rng, size_t samples = 60) {
    std::vector<float> gx = Analytic();
    std::vector<float> gp(flat.grads().begin(), flat.grads().end());
    ASSERT_FALSE(gx.empty());
    for (size_t k = 0; k < std::min(samples, x.size()); ++k) {
      const size_t i = x.size() <= samples ? k : rng() % x.size();
      Check(&x[i], gx[i], "input[" + std::to_string(i) + "]");
    }
    std::span<float> params = flat.params();
    for (size_t k = 0; k < std::min(samples, params.size()); ++k) {
      const size_t i = params.size() <= samples ? k : rng() % params.size();
      Check(&params[i], gp[i], "param[" + std::to_string(i) + "]");
    }
  }
};

TEST(GradientCheck, Dense) {
  std::mt19937_64 rng(1);
  Dense layer(7);
  Harness h{layer, {5}, 3};
  h.Setup(rng, Random(15, rng));
  h.CheckAll(rng);
  EXPECT_EQ(layer.NumParams(), 7 * 5 + 7);
}

TEST(GradientCheck, Conv2DSamePadding) {
  std::mt19937_64 rng(2);
  Conv2D layer({.filters = 4, .kernel = 3, .stride = 1, .padding = -1});
  Harness h{layer, {6, 5, 2}, 2};
  h.Setup(rng, Random(2 * 6 * 5 * 2, rng));
  EXPECT_EQ(h.out_shape, (Shape{6, 5, 4}));
  h.CheckAll(rng, 120);
}

TEST(GradientCheck, Conv2DStridedValid) {
  std::mt19937_64 rng(3);
  Conv2D layer({.filters = 3, .kernel = 3, .stride = 2, .padding = 0});
  Harness h{layer, {7, 7, 3}, 2};
  h.Setup(rng, Random(2 * 7 * 7 * 3, rng));
  EXPECT_EQ(h.out_shape, (Shape{3, 3, 3}));
  h.CheckAll(rng, 120);
}

TEST(GradientCheck, Conv2DOneChannelSamePadding) {
  std::mt19937_64 rng(6);
  Conv2D layer({.filters = 16, .kernel = 3, .stride = 1, .padding = -1});
  Harness h{layer, {6, 5, 1}, 3};
  h.Setup(rng, Random(3 * 6 * 5, rng));
  h.CheckAll(rng, 120);
}

TEST(GradientCheck, Conv2DIm2ColSamePadding) {
  std::mt19937_64 rng(2);
  Conv2D layer(
      {.filters = 4, .kernel = 3, .stride = 1, .padding = -1, .algorithm = ConvAlgorithm::kIm2Col});
  Harness h{layer, {6, 5, 2}, 2};
  h.Setup(rng, Random(2 * 6 * 5 * 2, rng));
  h.CheckAll(rng, 120);
}

TEST(GradientCheck, Conv2DDirectStridedValid) {
  std::mt19937_64 rng(3);
  Conv2D layer(
      {.filters = 3, .kernel = 3, .stride = 2, .padding = 0, .algorithm = ConvAlgorithm::kDirect});
  Harness h{layer, {7, 7, 3}, 2};
  h.Setup(rng, Random(2 * 7 * 7 * 3, rng));
  h.CheckAll(rng, 120);
}

TEST(GradientCheck, Conv2DIm2ColStridedValid) {
  std::mt19937_64 rng(3);
  Conv2D layer(
      {.filters = 3, .kernel = 3, .stride = 2, .padding = 0, .algorithm = ConvAlgorithm::kIm2Col});
  Harness h{layer, {7, 7, 3}, 2};
  h.Setup(rng, Random(2 * 7 * 7 * 3, rng));
  h.CheckAll(rng, 120);
}

// Direct and im2col agree on outputs and all gradients, over a batch large
// enough to be cut into several chunks and image groups.
TEST(Conv2D, DirectMatchesIm2Col) {
  // One channel with 16 filters takes direct_conv's unrolled 3x3 path; 6
  // filters and 5 channels its general one.
  const std::pair<Shape, int64_t> cases[] = {{{9, 8, 1}, 16}, {{9, 8, 1}, 6}, {{6, 7, 5}, 6}};
  for (const auto& [in_shape, filters] : cases) {
    SCOPED_TRACE(ShapeToString(in_shape) + " filters=" + std::to_string(filters));
    std::mt19937_64 rng(4);
    const int64_t batch = 37;
    std::vector<float> x = Random(static_cast<size_t>(batch * NumElements(in_shape)), rng);
    std::vector<float> out[2], gx[2], grads[2];
    std::vector<float> gy;
    for (int a = 0; a < 2; ++a) {
      Conv2D layer({.filters = filters,
                    .kernel = 3,
                    .stride = 1,
                    .padding = -1,
                    .algorithm = a == 0 ? ConvAlgorithm::kDirect : ConvAlgorithm::kIm2Col});
      absl::StatusOr<Shape> s = layer.Build(in_shape);
      ASSERT_TRUE(s.ok()) << s.status();
      FlatParameters flat;
      layer.DeclareParams(flat, "p.");
      flat.Allocate();
      layer.BindParams(flat);
      std::mt19937_64 init(5);
      layer.InitParams(init);
      for (float& p : flat.params()) p += 0.1f;  // non-zero bias
      out[a].resize(static_cast<size_t>(batch * NumElements(*s)));
      if (gy.empty()) gy = Random(out[a].size(), rng);
      gx[a].resize(x.size());
      TensorView in(x.data(), WithBatch(batch, in_shape));
      TensorView o(out[a].data(), WithBatch(batch, *s));
      TensorView gin(gx[a].data(), in.shape());
      layer.Forward(in, o, /*training=*/true);
      layer.Backward(in, o, TensorView(gy.data(), o.shape()), &gin);
      grads[a].assign(flat.grads().begin(), flat.grads().end());
    }
    for (size_t i = 0; i < out[0].size(); ++i) ASSERT_NEAR(out[0][i], out[1][i], 1e-4f) << i;
    for (size_t i = 0; i < gx[0].size(); ++i) ASSERT_NEAR(gx[0][i], gx[1][i], 1e-4f) << i;
    for (size_t i = 0; i < grads[0].size(); ++i) {
      ASSERT_NEAR(grads[0][i], grads[1][i], 1e-3f * (1.0f + std::abs(grads[1][i]))) << i;
    }
  }
}

TEST(GradientCheck, MaxPool2D) {
  std::mt19937_64 rng(4);
  MaxPool2D layer(2, 2);
  Harness h{layer, {4, 6, 3}, 2};
  // Distinct values at least 0.05 apart so +-eps never changes the arg-max.
  std::vector<float> x(2 * 4 * 6 * 3);
  std::iota(x.begin(), x.end(), 0.0f);
  std::shuffle(x.begin(), x.end(), rng);
  for (float& v : x) v *= 0.05f;
  h.Setup(rng, x);
  EXPECT_EQ(h.out_shape, (Shape{2, 3, 3}));
  h.CheckAll(rng, x.size());
}

TEST(GradientCheck, ReLU) {
  std::mt19937_64 rng(5);
  ReLU layer;
  Harness h{layer, {4, 3}, 3};
  // Keep inputs away from the kink at 0.
  std::vector<float> x = Random(36, rng, 0.1f, 1.0f);
  for (size_t i = 0; i < x.size(); i += 2) x[i] = -x[i];
  h.Setup(rng, x);
  h.CheckAll(rng, x.size());
}

TEST(GradientCheck, Flatten) {
  std::mt19937_64 rng(6);
  Flatten layer;
  Harness h{layer, {2, 3, 2}, 2};
  h.Setup(rng, Random(24, rng));
  EXPECT_EQ(h.out_shape, (Shape{12}));
  h.CheckAll(rng, 24);
}

TEST(GradientCheck, DropoutReplaysItsMask) {
  std::mt19937_64 rng(7);
  Dropout layer(0.4f);
  Harness h{layer, {50}, 2};
  h.before_forward = [&layer] { layer.Reseed(1234); };
  h.Setup(rng, Random(100, rng));
  h.CheckAll(rng, 100);
}

TEST(Dropout, DropsAboutRateAndScalesKept) {
  Dropout layer(0.25f);
  ASSERT_TRUE(layer.Build({10000}).ok());
  layer.Reseed(9);
  std::vector<float> x(10000, 1.0f), y(10000);
  layer.Forward(TensorView(x.data(), {1, 10000}), TensorView(y.data(), {1, 10000}), true);
  const auto dropped = std::count(y.begin(), y.end(), 0.0f);
  EXPECT_NEAR(static_cast<double>(dropped) / 10000.0, 0.25, 0.02);
  for (float v : y) {
    if (v != 0.0f) {
      EXPECT_FLOAT_EQ(v, 1.0f / 0.75f);
    }
  }
  // Inference is the identity.
  layer.Forward(TensorView(x.data(), {1, 10000}), TensorView(y.data(), {1, 10000}), false);
  EXPECT_EQ(x, y);
}

// A trainer that moves to step s (a resume, a step run again after the world
// re-formed) sets the call number: the mask is the one training forward s of
// an uninterrupted run draws, whatever this layer drew before.
TEST(Dropout, SetCallsReplaysTheMaskOfThatForward) {
  Dropout layer(0.5f);
  ASSERT_TRUE(layer.Build({1000}).ok());
  std::vector<float> x(1000, 1.0f), y(1000);
  auto forward = [&] {
    layer.Forward(TensorView(x.data(), {1, 1000}), TensorView(y.data(), {1, 1000}), true);
    return y;
  };
  layer.Reseed(11);
  std::vector<std::vector<float>> masks;
  for (int call = 0; call < 4; ++call) masks.push_back(forward());
  EXPECT_NE(masks[2], masks[3]);
  layer.SetCalls(2);  // after four forwards: back to the third
  EXPECT_EQ(forward(), masks[2]);
  EXPECT_EQ(forward(), masks[3]);
  layer.Reseed(11);
  layer.SetCalls(3);  // a fresh process resuming at call 3
  EXPECT_EQ(forward(), masks[3]);
}

TEST(GradientCheck, SoftmaxCrossEntropy) {
  std::mt19937_64 rng(8);
  const int64_t n = 4, k = 5;
  std::vector<float> z = Random(n * k, rng, -3.0f, 3.0f);
  std::vector<int32_t> labels = {0, 3, 4, 2};
  std::vector<float> g(n * k);
  TensorView gv(g.data(), {n, k});
  SoftmaxCrossEntropy(TensorView(z.data(), {n, k}), labels.data(), &gv);
  for (size_t i = 0; i < z.size(); ++i) {
    const float saved = z[i];
    z[i] = saved + 1e-3f;
    const double lp =
        SoftmaxCrossEntropy(TensorView(z.data(), {n, k}), labels.data(), nullptr).loss;
    z[i] = saved - 1e-3f;
    const double lm =
        SoftmaxCrossEntropy(TensorView(z.data(), {n, k}), labels.data(), nullptr).loss;
    z[i] = saved;
    EXPECT_NEAR(g[i], (lp - lm) / 2e-3, 2e-3) << "logit " << i;
  }
}

TEST(SoftmaxCrossEntropy, KnownValuesAndStability) {
  // Uniform logits: loss = log(k); huge logits must not overflow.
  std::vector<float> z = {0, 0, 0, 0, 1000, 0, 0, 0};
  std::vector<int32_t> labels = {2, 0};
  LossResult r = SoftmaxCrossEntropy(TensorView(z.data(), {2, 4}), labels.data(), nullptr);
  EXPECT_NEAR(r.loss, (std::log(4.0) + 0.0) / 2.0, 1e-6);
  EXPECT_TRUE(std::isfinite(r.loss));
  EXPECT_EQ(r.correct, 1);  // row 0: arg-max 0 != 2; row 1: 0 == 0
}

}  // namespace
}  // namespace kubetrain::nn
