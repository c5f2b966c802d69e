// CPU/GPU parity (CTest label `gpu`): every layer's forward and backward on
// the CUDA device within 1e-4 relative of the CPU device, the optimizer
// updates (SGD momentum, Adam) bit for bit the CPU's, 100 training steps
// whose loss curve follows the CPU's, and the same 100 steps captured as a
// CUDA graph bit for bit equal to them launched one by one. Without a usable
// GPU every case skips with the driver's reason.
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

struct Trained {
  std::vector<double> curve;
  std::vector<float> params;
  std::string log;
};

Trained TrainOn(ComputeDevice& device, const std::string& cuda_graph = "auto") {
  data::Dataset train = Quadrants(640, 1), test = Quadrants(128, 2);
  std::unique_ptr<nn::Model> model = *nn::BuildModelFromSpec(
      "layers: [{type: conv2d, filters: 8, kernel: 3}, relu, {type: maxpool2d, size: 2}, flatten,"
      " {type: dropout, rate: 0.1}, {type: dense, units: 16}, relu, {type: dense, units: 4}]",
      "test", Shape{8, 8, 3}, &device);
  exchange::LocalExchange local(
      *optim::MakeOptimizer({.kind = "adam"}, static_cast<size_t>(model->num_params()), &device),
      *optim::LrSchedule::Create({.base_lr = 0.01f}));
  std::ostringstream out;
  ProgressReporter progress(out);
  FakeClock clock;
  Trainer t(
      *model, local, train, &test,
      {.epochs = 5, .batch_size = 32, .seed = 3, .log_every_steps = 10, .cuda_graph = cuda_graph},
      progress, clock);
  absl::StatusOr<TrainResult> r = t.Run();
  EXPECT_TRUE(r.ok()) << r.status();
  Trained out_run;
  out_run.log = out.str();
  out_run.curve = testing::LossCurveOf(out_run.log);
  out_run.params.resize(static_cast<size_t>(model->num_params()));
  EXPECT_TRUE(device
                  .CopyToHost(model->params().data(), out_run.params.data(),
                              out_run.params.size() * sizeof(float))
                  .ok());
  return out_run;
}

std::vector<double> LossCurve(ComputeDevice& device) { return TrainOn(device).curve; }

// The step captured as a CUDA graph (after two warm-up steps) and replayed
// ends bit for bit where the same 100 steps launched kernel by kernel end:
// the graph reads the learning rate, Adam's coefficients, the batch's
// place and dropout's call number from device memory, as they do.
TEST_F(GpuParity, ACapturedStepEqualsTheUncapturedOneOver100Steps) {
  const Trained captured = TrainOn(*gpu_, "on");
  const Trained launched = TrainOn(*gpu_, "off");
  EXPECT_NE(captured.log.find("as a CUDA graph"), std::string::npos) << captured.log;
  ASSERT_EQ(captured.params.size(), launched.params.size());
  EXPECT_EQ(captured.params, launched.params);
  EXPECT_EQ(captured.curve, launched.curve);
}

// The fused optimizer updates (SGD with momentum, the default, and Adam)
// give the CPU's bits on the GPU: every multiply-add is an explicit fmaf
// (kernels/optimizer_update.h), so nvcc's contraction changes nothing.
TEST_F(GpuParity, TheOptimizerUpdatesGiveTheCpusBits) {
  constexpr int64_t kN = 100003;
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1, 1);
  auto random = [&] {
    std::vector<float> v(kN);
    for (float& x : v) x = u(rng);
    return v;
  };
  auto on_gpu = [&](const std::vector<float>& host) {
    DeviceBuffer b = *gpu_->Allocate(kN * sizeof(float));
    gpu_->CopyToDevice(host.data(), b.data(), kN * sizeof(float));
    return b;
  };
  auto back = [&](const DeviceBuffer& b) {
    std::vector<float> host(kN);
    EXPECT_TRUE(gpu_->CopyToHost(b.data(), host.data(), kN * sizeof(float)).ok());
    return host;
  };
  for (const bool nesterov : {false, true}) {
    std::vector<float> p = random(), v = random();
    DeviceBuffer dp = on_gpu(p), dv = on_gpu(v);
    for (int step = 0; step < 3; ++step) {
      const std::vector<float> g = random();
      DeviceBuffer dg = on_gpu(g);
      const kernels::SgdParams o{.lr = 0.05f,
                                 .weight_decay = 1e-4f,
                                 .momentum = 0.9f,
                                 .nesterov = nesterov,
                                 .grad_scale = 0.5f};
      cpu_.SgdUpdate(o, p.data(), g.data(), v.data(), kN);
      gpu_->SgdUpdate(o, dp.data(), dg.data(), dv.data(), kN);
    }
    EXPECT_EQ(back(dp), p) << "sgd momentum, nesterov " << nesterov;
    EXPECT_EQ(back(dv), v) << "velocity, nesterov " << nesterov;
  }
  std::vector<float> p = random(), m(kN, 0.0f), w(kN, 0.0f);
  DeviceBuffer dp = on_gpu(p), dm = on_gpu(m), dw = on_gpu(w);
  const kernels::AdamParams a{
      .step = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .weight_decay = 1e-2f, .epsilon = 1e-8f};
  for (int step = 0; step < 3; ++step) {
    const std::vector<float> g = random();
    DeviceBuffer dg = on_gpu(g);
    cpu_.AdamUpdate(a, p.data(), g.data(), m.data(), w.data(), kN);
    gpu_->AdamUpdate(a, dp.data(), dg.data(), dm.data(), dw.data(), kN);
  }
  EXPECT_EQ(back(dp), p) << "adam";
  EXPECT_EQ(back(dm), m) << "adam m";
  EXPECT_EQ(back(dw), w) << "adam v";
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
