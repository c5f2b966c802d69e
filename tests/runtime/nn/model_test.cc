#include "runtime/nn/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/nn/model_spec.h"
#include "runtime/nn/softmax_cross_entropy.h"

namespace kubetrain::nn {
namespace {

TEST(Model, BuiltinsHaveTheDocumentedShapes) {
  absl::StatusOr<std::unique_ptr<Model>> mlp = LoadModel("mlp", Shape{28, 28, 1});
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  EXPECT_EQ((*mlp)->num_params() >= 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10, true);
  EXPECT_EQ((*mlp)->output_shape(), (Shape{10}));
  absl::StatusOr<std::unique_ptr<Model>> cnn = LoadModel("cnn", Shape{28, 28, 1});
  ASSERT_TRUE(cnn.ok()) << cnn.status();
  EXPECT_EQ((*cnn)->output_shape(), (Shape{10}));
}

TEST(Model, ParametersAreOneFlatBufferWithLayerViews) {
  absl::StatusOr<std::unique_ptr<Model>> m = LoadModel("mlp", Shape{28, 28, 1});
  ASSERT_TRUE(m.ok());
  const FlatParameters& flat = (*m)->flat();
  ASSERT_EQ(flat.entries().size(), 6u);  // 3 dense layers x (weight, bias)
  int64_t prev_end = 0;
  for (const FlatEntry& e : flat.entries()) {
    EXPECT_GE(e.offset, prev_end);
    EXPECT_EQ(e.offset % 16, 0) << e.name;
    prev_end = e.offset + e.size;
  }
  EXPECT_EQ(prev_end, (*m)->num_params());
  EXPECT_EQ(flat.entries()[0].shape, (Shape{256, 784}));
}

TEST(Model, InitIsDeterministicBySeed) {
  auto a = *LoadModel("cnn", Shape{28, 28, 1});
  auto b = *LoadModel("cnn", Shape{28, 28, 1});
  a->InitParams(5);
  b->InitParams(5);
  EXPECT_TRUE(std::equal(a->params().begin(), a->params().end(), b->params().begin()));
  b->InitParams(6);
  EXPECT_FALSE(std::equal(a->params().begin(), a->params().end(), b->params().begin()));
}

// A relu right after a conv2d or dense layer is applied by that layer
// (Layer::FuseRelu). Putting a rate-0 dropout (a copy) in between stops the
// fusion; logits and every gradient must be the same bits either way. The
// first conv (one channel) runs direct, the second (8 channels) by im2col.
TEST(Model, FusedReluGivesTheSameBitsAsASeparateLayer) {
  auto spec = [](bool fused) {
    const std::string gap = fused ? "" : R"({"type": "dropout", "rate": 0},)";
    return absl::StrCat(R"({"input": [10, 10, 1], "layers": [
      {"type": "conv2d", "filters": 8, "kernel": 3},)",
                        gap, R"("relu",
      {"type": "conv2d", "filters": 16, "kernel": 3},)",
                        gap, R"("relu",
      {"type": "maxpool2d", "size": 2},
      "flatten",)",
                        gap, R"({"type": "dense", "units": 12},)", gap, R"("relu",
      {"type": "dense", "units": 5},)",
                        gap, R"("relu"]})");
  };
  auto fused = *BuildModelFromSpec(spec(true), "fused", std::nullopt);
  auto plain = *BuildModelFromSpec(spec(false), "plain", std::nullopt);
  fused->InitParams(7);
  ASSERT_EQ(fused->num_params(), plain->num_params());
  // Same parameters (dropout's InitParams draws its seed from the rng).
  std::copy(fused->params().begin(), fused->params().end(), plain->params().begin());
  const int64_t batch = 9;
  std::mt19937_64 rng(12);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> x(static_cast<size_t>(batch * 100));
  for (float& v : x) v = d(rng);
  std::vector<float> g(static_cast<size_t>(batch * 5));
  for (float& v : g) v = d(rng);
  TensorView a = fused->Forward(x.data(), batch, /*training=*/true);
  TensorView b = plain->Forward(x.data(), batch, /*training=*/true);
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), static_cast<size_t>(a.size()) * sizeof(float)), 0);
  int zeros = 0;
  for (int64_t i = 0; i < a.size(); ++i) zeros += a[i] == 0.0f;
  EXPECT_GT(zeros, 0) << "the last relu never clipped: the test would not see a missing one";
  fused->Backward(TensorView(g.data(), a.shape()));
  plain->Backward(TensorView(g.data(), b.shape()));
  EXPECT_EQ(std::memcmp(fused->grads().data(), plain->grads().data(),
                        static_cast<size_t>(fused->num_params()) * sizeof(float)),
            0);
}

// Whole-model gradient check through conv, pool, relu, flatten, dense and
// the loss: the flat gradient must match finite differences.
TEST(Model, WholeModelGradientMatchesFiniteDifferences) {
  const char* spec = R"({"input": [6, 6, 1], "layers": [
      {"type": "conv2d", "filters": 3, "kernel": 3},
      "relu",
      {"type": "maxpool2d", "size": 2},
      "flatten",
      {"type": "dense", "units": 4}]})";
  auto m = *BuildModelFromSpec(spec, "test", std::nullopt);
  m->InitParams(3);
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> x(2 * 36);
  for (float& v : x) v = d(rng);
  std::vector<int32_t> y = {1, 3};
  auto loss = [&] {
    TensorView z = m->Forward(x.data(), 2, true);
    return SoftmaxCrossEntropy(z, y.data(), nullptr).loss;
  };
  TensorView z = m->Forward(x.data(), 2, true);
  std::vector<float> gz(8);
  TensorView gzv(gz.data(), {2, 4});
  SoftmaxCrossEntropy(z, y.data(), &gzv);
  m->Backward(gzv);
  std::vector<float> g(m->grads().begin(), m->grads().end());
  std::span<float> p = m->params();
  int checked = 0, kinks = 0;
  for (const FlatEntry& e : m->flat().entries()) {
    for (int64_t i = e.offset; i < e.offset + e.size; i += 3, ++checked) {
      const float saved = p[i];
      const double l0 = loss();
      p[i] = saved + 1e-3f;
      const double lp = loss();
      p[i] = saved - 1e-3f;
      const double lm = loss();
      p[i] = saved;
      const double central = (lp - lm) / 2e-3, right = (lp - l0) / 1e-3, left = (l0 - lm) / 1e-3;
      const double tol = 3e-3 + 2e-2 * std::abs(g[i]);
      // A perturbation may cross a ReLU/max kink: then the two one-sided
      // derivatives differ and the analytic one must equal one of them.
      const bool kink = std::abs(right - left) > 10 * tol;
      if (kink) {
        ++kinks;
        EXPECT_TRUE(std::abs(g[i] - right) < tol || std::abs(g[i] - left) < tol)
            << e.name << " " << i << " analytic " << g[i] << " left " << left << " right " << right;
      } else {
        EXPECT_NEAR(g[i], central, tol) << e.name << " " << i;
      }
    }
  }
  EXPECT_GT(checked, 20);
  EXPECT_LT(kinks, checked / 5);
}

}  // namespace
}  // namespace kubetrain::nn
