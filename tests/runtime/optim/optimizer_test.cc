#include "runtime/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/optim/lr_schedule.h"

namespace kubetrain::optim {
namespace {

TEST(Sgd, PlainStepIsLrTimesGradient) {
  auto opt = *MakeOptimizer({.kind = "sgd", .momentum = 0.0f}, 3);
  std::vector<float> p = {1, 2, 3}, g = {0.5f, -1, 0};
  opt->Apply(p, g, 0.1f);
  EXPECT_FLOAT_EQ(p[0], 0.95f);
  EXPECT_FLOAT_EQ(p[1], 2.1f);
  EXPECT_FLOAT_EQ(p[2], 3.0f);
  EXPECT_TRUE(opt->State().empty());
}

TEST(Sgd, MomentumAccumulatesVelocity) {
  auto opt = *MakeOptimizer({.kind = "sgd", .momentum = 0.9f}, 1);
  std::vector<float> p = {0}, g = {1};
  opt->Apply(p, g, 1.0f);  // v = 1, p = -1
  opt->Apply(p, g, 1.0f);  // v = 1.9, p = -2.9
  EXPECT_FLOAT_EQ(p[0], -2.9f);
  ASSERT_EQ(opt->State().size(), 1u);
  EXPECT_FLOAT_EQ(opt->State()[0].second[0], 1.9f);
  EXPECT_EQ(opt->steps(), 2);
}

TEST(Sgd, WeightDecayShrinksParameters) {
  auto opt = *MakeOptimizer({.kind = "sgd", .momentum = 0.0f, .weight_decay = 0.5f}, 1);
  std::vector<float> p = {2}, g = {0};
  opt->Apply(p, g, 0.1f);  // p -= 0.1 * 0.5 * 2
  EXPECT_FLOAT_EQ(p[0], 1.9f);
}

TEST(Adam, FirstStepMovesByLrTimesSign) {
  auto opt = *MakeOptimizer({.kind = "adam"}, 2);
  std::vector<float> p = {0, 0}, g = {3, -0.01f};
  opt->Apply(p, g, 0.01f);
  // Bias-corrected m/sqrt(v) = sign(g) on the first step.
  EXPECT_NEAR(p[0], -0.01f, 1e-6);
  EXPECT_NEAR(p[1], 0.01f, 1e-5);
  EXPECT_EQ(opt->State().size(), 2u);
}

TEST(Optimizers, MinimiseAQuadratic) {
  for (const char* kind : {"sgd", "adam"}) {
    auto opt = *MakeOptimizer({.kind = kind}, 2);
    std::vector<float> p = {5, -3}, g(2);
    for (int i = 0; i < 500; ++i) {
      g[0] = 2 * (p[0] - 1);  // minimum at (1, 2)
      g[1] = 2 * (p[1] - 2);
      opt->Apply(p, g, 0.05f);
    }
    EXPECT_NEAR(p[0], 1.0f, 1e-2) << kind;
    EXPECT_NEAR(p[1], 2.0f, 1e-2) << kind;
  }
}

// A parameter server applies a sync step chunk by chunk as the workers'
// gradients arrive (PsShard's pipelined rounds): parts in any order, then
// the step counted, give ApplyBlocks' bits and state.
TEST(Optimizers, ApplyPartsGiveApplyBlocksBits) {
  const std::vector<OptimizerOptions> cases = {
      {.kind = "sgd", .momentum = 0.0f},
      {.kind = "sgd", .momentum = 0.9f, .nesterov = true, .weight_decay = 1e-3f},
      {.kind = "adam", .weight_decay = 1e-2f},
  };
  const size_t n = 5 * Optimizer::kApplyBlock + 333;
  const size_t part = 2 * Optimizer::kApplyBlock + 5;  // parts end inside blocks
  for (const OptimizerOptions& o : cases) {
    auto whole = *MakeOptimizer(o, n);
    auto parts = *MakeOptimizer(o, n);
    std::vector<float> p1(n), p2(n), g(n);
    for (size_t i = 0; i < n; ++i) p1[i] = p2[i] = std::sin(0.002f * static_cast<float>(i));
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < n; ++i) g[i] = std::cos(0.03f * static_cast<float>(i * (step + 2)));
      whole->ApplyBlocks(
          p1, [&](size_t b, size_t e, float* out) { std::copy(g.begin() + b, g.begin() + e, out); },
          0.05f);
      // The last part first: parts may come in any order.
      std::vector<size_t> starts;
      for (size_t b = 0; b < n; b += part) starts.push_back(b);
      std::reverse(starts.begin(), starts.end());
      for (size_t off : starts) {
        const size_t len = std::min(part, n - off);
        parts->ApplyPart(
            std::span<float>(p2).subspan(off, len), off,
            [&](size_t b, size_t e, float* out) {
              ASSERT_LE(e, len);
              std::copy(g.begin() + off + b, g.begin() + off + e, out);
            },
            0.05f);
      }
      EXPECT_EQ(parts->steps(), step);  // a part does not count the step
      parts->set_steps(parts->steps() + 1);
    }
    EXPECT_EQ(p1, p2) << o.kind << " momentum " << o.momentum;
    const auto s1 = whole->State(), s2 = parts->State();
    ASSERT_EQ(s1.size(), s2.size());
    for (size_t k = 0; k < s1.size(); ++k) {
      EXPECT_TRUE(std::equal(s1[k].second.begin(), s1[k].second.end(), s2[k].second.begin()))
          << o.kind << " " << s1[k].first;
    }
  }
}

TEST(Optimizers, ApplyBlocksGivesApplysBits) {
  const std::vector<OptimizerOptions> cases = {
      {.kind = "sgd", .momentum = 0.0f},
      {.kind = "sgd", .momentum = 0.9f, .nesterov = true, .weight_decay = 1e-3f},
      {.kind = "sgd", .momentum = 0.5f},
      {.kind = "adam", .weight_decay = 1e-2f},
  };
  // Three whole blocks and a ragged tail.
  const size_t n = 3 * Optimizer::kApplyBlock + 17;
  for (const OptimizerOptions& o : cases) {
    auto whole = *MakeOptimizer(o, n);
    auto blocks = *MakeOptimizer(o, n);
    std::vector<float> p1(n), p2(n), g(n);
    for (size_t i = 0; i < n; ++i) p1[i] = p2[i] = std::sin(0.001f * static_cast<float>(i));
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < n; ++i) g[i] = std::cos(0.01f * static_cast<float>(i * (step + 1)));
      whole->Apply(p1, g, 0.05f);
      size_t next = 0;  // blocks come in order, each at most kApplyBlock
      blocks->ApplyBlocks(
          p2,
          [&](size_t begin, size_t end, float* out) {
            ASSERT_EQ(begin, next);
            ASSERT_GT(end, begin);
            ASSERT_LE(end - begin, Optimizer::kApplyBlock);
            std::copy(g.begin() + begin, g.begin() + end, out);
            next = end;
          },
          0.05f);
      EXPECT_EQ(next, n) << o.kind;
    }
    EXPECT_EQ(p1, p2) << o.kind << " momentum " << o.momentum;
    EXPECT_EQ(whole->steps(), blocks->steps());
    const auto s1 = whole->State(), s2 = blocks->State();
    ASSERT_EQ(s1.size(), s2.size());
    for (size_t k = 0; k < s1.size(); ++k) {
      EXPECT_TRUE(std::equal(s1[k].second.begin(), s1[k].second.end(), s2[k].second.begin()))
          << o.kind << " " << s1[k].first;
    }
  }
}

TEST(Optimizers, BadOptionsAreRefused) {
  EXPECT_FALSE(MakeOptimizer({.kind = "rmsprop"}, 1).ok());
  EXPECT_FALSE(MakeOptimizer({.kind = "sgd", .momentum = 1.0f}, 1).ok());
  EXPECT_FALSE(MakeOptimizer({.kind = "sgd", .weight_decay = -1.0f}, 1).ok());
  EXPECT_FALSE(MakeOptimizer({.kind = "adam", .epsilon = 0.0f}, 1).ok());
}

TEST(LrSchedule, Constant) {
  auto s = *LrSchedule::Create({.kind = "constant", .base_lr = 0.1f});
  EXPECT_FLOAT_EQ(s.At(0), 0.1f);
  EXPECT_FLOAT_EQ(s.At(100000), 0.1f);
}

TEST(LrSchedule, StepDecays) {
  auto s = *LrSchedule::Create({.kind = "step", .base_lr = 1.0f, .step_size = 10, .gamma = 0.5f});
  EXPECT_FLOAT_EQ(s.At(9), 1.0f);
  EXPECT_FLOAT_EQ(s.At(10), 0.5f);
  EXPECT_FLOAT_EQ(s.At(25), 0.25f);
}

TEST(LrSchedule, CosineWithWarmup) {
  auto s = *LrSchedule::Create(
      {.kind = "cosine", .base_lr = 1.0f, .warmup_steps = 10, .total_steps = 110, .min_lr = 0.0f});
  EXPECT_FLOAT_EQ(s.At(0), 0.1f);
  EXPECT_FLOAT_EQ(s.At(9), 1.0f);
  EXPECT_FLOAT_EQ(s.At(10), 1.0f);
  EXPECT_NEAR(s.At(60), 0.5f, 1e-6);
  EXPECT_NEAR(s.At(110), 0.0f, 1e-6);
  EXPECT_NEAR(s.At(500), 0.0f, 1e-6);
}

TEST(LrSchedule, BadOptionsAreRefused) {
  EXPECT_FALSE(LrSchedule::Create({.kind = "linear"}).ok());
  EXPECT_FALSE(LrSchedule::Create({.kind = "constant", .base_lr = 0}).ok());
  EXPECT_FALSE(LrSchedule::Create({.kind = "step", .step_size = 0}).ok());
  EXPECT_FALSE(LrSchedule::Create({.kind = "cosine", .total_steps = 0}).ok());
}

}  // namespace
}  // namespace kubetrain::optim
