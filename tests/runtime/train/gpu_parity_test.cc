// CPU/GPU parity (CTest label `gpu`): every layer's forward and backward on
// the CUDA device within 1e-4 relative of the CPU device, and 100 training
// steps whose loss curve follows the CPU's. Without a usable GPU every case
// skips with the driver's reason.
#include <cmath>
#include <random>
#include <sstream>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/exchange/local_exchange.h"
#include "runtime/nn/model_spec.h"
#include "runtime/nn/softmax_cross_entropy.h"
#include "runtime/tensor/cpu_device.h"
#include "runtime/tensor/device.h"
#include "runtime/train/trainer.h"
#include "tests/support/progress_text.h"
#include "tests/support/quadrants_dataset.h"

namespace kubetrain::train {
namespace {

class GpuParity : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<DeviceInfo> info = SelectDevice("cuda");
    if (!info.ok()) GTEST_SKIP() << "no GPU on this machine: " << info.status().message();
    absl::StatusOr<std::unique_ptr<ComputeDevice>> d = OpenComputeDevice(*info, {});
    if (!d.ok()) GTEST_SKIP() << "no GPU on this machine: " << d.status().message();
    gpu_ = *std::move(d);
  }
  CpuDevice cpu_;
  std::unique_ptr<ComputeDevice> gpu_;
};

struct Pass {
  std::vector<float> logits, grads;
  double loss = 0;
};

// One forward and backward of `spec` on random images {8, 8, 3}.
Pass RunOnce(const std::string& spec, ComputeDevice& device) {
  absl::StatusOr<std::unique_ptr<nn::Model>> m =
      nn::BuildModelFromSpec(spec, "test", Shape{8, 8, 3}, &device);
  EXPECT_TRUE(m.ok()) << m.status();
  nn::Model& model = **m;
  model.InitParams(11);
  const int64_t batch = 16;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(batch * 8 * 8 * 3);
  for (float& v : x) v = u(rng);
  std::vector<int32_t> labels(batch);
  for (int64_t i = 0; i < batch; ++i) labels[i] = static_cast<int32_t>(i % 10);
  TensorView logits = model.Forward(x.data(), batch, /*training=*/true);
  DeviceBuffer g = *device.Allocate(batch * 10 * sizeof(float));
  TensorView grad(g.data(), {batch, 10});
  absl::StatusOr<nn::LossResult> loss =
      nn::SoftmaxCrossEntropy(device, logits, labels.data(), &grad);
  EXPECT_TRUE(loss.ok()) << loss.status();
  model.Backward(grad);
  Pass p;
  p.loss = loss.ok() ? loss->loss : 0;
  p.logits.resize(batch * 10);
  p.grads.resize(model.grads().size());
  EXPECT_TRUE(device.CopyToHost(logits.data(), p.logits.data(), p.logits.size() * 4).ok());
  EXPECT_TRUE(device.CopyToHost(model.grads().data(), p.grads.data(), p.grads.size() * 4).ok());
  return p;
}

// Each element within `rel` of the largest magnitude of the reference.
void ExpectClose(const std::vector<float>& want, const std::vector<float>& got, double rel,
                 const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  double scale = 1e-30;
  for (float v : want) scale = std::max(scale, std::abs(static_cast<double>(v)));
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], rel * scale) << what << " index " << i;
  }
}

TEST_F(GpuParity, EachLayerForwardAndBackwardWithin1e4OfTheCpu) {
  // The layer under test sits after a trainable layer, so its input
  // gradient reaches that layer's parameter gradients.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"dense", "layers: [flatten, {type: dense, units: 32}, {type: dense, units: 10}]"},
      {"conv2d",
       "layers: [{type: conv2d, filters: 4, kernel: 3}, {type: conv2d, filters: 8, "
       "kernel: 3, stride: 2, padding: 1}, flatten, {type: dense, units: 10}]"},
      {"conv2d+relu",
       "layers: [{type: conv2d, filters: 16, kernel: 3}, relu, flatten, "
       "{type: dense, units: 10}]"},
      {"maxpool2d",
       "layers: [{type: conv2d, filters: 4, kernel: 3}, {type: maxpool2d, size: 2},"
       " flatten, {type: dense, units: 10}]"},
      {"relu", "layers: [flatten, {type: dense, units: 32}, relu, {type: dense, units: 10}]"},
      {"dropout",
       "layers: [flatten, {type: dense, units: 32}, {type: dropout, rate: 0.5}, "
       "{type: dense, units: 10}]"},
  };
  for (const auto& [name, spec] : cases) {
    const Pass want = RunOnce(spec, cpu_);
    const Pass got = RunOnce(spec, *gpu_);
    EXPECT_NEAR(got.loss, want.loss, 1e-4 * std::abs(want.loss)) << name;
    ExpectClose(want.logits, got.logits, 1e-4, name + " forward");
    ExpectClose(want.grads, got.grads, 1e-4, name + " backward");
  }
}

data::Dataset Quadrants(int n, uint64_t seed) {
  return testing::QuadrantsDataset(n, seed, /*side=*/8, /*channels=*/3);
}

std::vector<double> LossCurve(ComputeDevice& device) {
  data::Dataset train = Quadrants(640, 1), test = Quadrants(128, 2);
  std::unique_ptr<nn::Model> model = *nn::BuildModelFromSpec(
      "layers: [{type: conv2d, filters: 8, kernel: 3}, relu, {type: maxpool2d, size: 2}, flatten,"
      " {type: dropout, rate: 0.1}, {type: dense, units: 16}, relu, {type: dense, units: 4}]",
      "test", Shape{8, 8, 3}, &device);
  exchange::LocalExchange local(
      *MakeOptimizer({.kind = "adam"}, static_cast<size_t>(model->num_params()), &device),
      *LrSchedule::Create({.base_lr = 0.01f}));
  std::ostringstream out;
  ProgressReporter progress(out);
  FakeClock clock;
  Trainer t(*model, local, train, &test,
            {.epochs = 5, .batch_size = 32, .seed = 3, .log_every_steps = 10}, progress, clock);
  absl::StatusOr<TrainResult> r = t.Run();
  EXPECT_TRUE(r.ok()) << r.status();
  return testing::LossCurveOf(out.str());
}

TEST_F(GpuParity, HundredStepsFollowTheCpuLossCurve) {
  const std::vector<double> want = LossCurve(cpu_);
  const std::vector<double> got = LossCurve(*gpu_);
  ASSERT_EQ(want.size(), 10u);  // 640 / 32 * 5 = 100 steps, a line every 10
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 0.01 + 0.02 * want[i]) << "point " << i;
  }
  EXPECT_LT(got.back(), got.front() / 2) << "it learns on the GPU";
}

}  // namespace
}  // namespace kubetrain::train
