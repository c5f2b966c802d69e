// The model on a device whose memory is not host memory (FakeDevice: the
// paths a GPU takes, computed on the CPU): the same logits, loss and
// gradients as on the CPU device, host-staged initialisation, and the
// start-up memory check.
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/nn/model_spec.h"
#include "runtime/nn/softmax_cross_entropy.h"
#include "tests/support/fake_device.h"

namespace kubetrain::nn {
namespace {

// Every layer kind, two conv algorithms' worth of shapes (the first conv
// is direct on the CPU device, the second im2col), fused ReLUs.
constexpr char kSpec[] = R"(
input: [12, 12, 2]
layers:
  - {type: conv2d, filters: 8, kernel: 3, padding: same}
  - relu
  - {type: maxpool2d, size: 2}
  - {type: conv2d, filters: 6, kernel: 3, stride: 2, padding: 1}
  - relu
  - {type: dropout, rate: 0.3}
  - flatten
  - {type: dense, units: 16}
  - relu
  - {type: dense, units: 5}
)";

struct Pass {
  std::vector<float> logits, grads;
  double loss = 0;
};

Pass RunOnce(ComputeDevice* device, int64_t batch) {
  absl::StatusOr<std::unique_ptr<Model>> m =
      BuildModelFromSpec(kSpec, "test", std::nullopt, device);
  EXPECT_TRUE(m.ok()) << m.status();
  Model& model = **m;
  model.InitParams(7);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(batch * 12 * 12 * 2);
  for (float& v : x) v = u(rng);
  std::vector<int32_t> labels(batch);
  for (int64_t i = 0; i < batch; ++i) labels[i] = static_cast<int32_t>(i % 5);
  TensorView logits = model.Forward(x.data(), batch, /*training=*/true);
  absl::StatusOr<DeviceBuffer> g = model.device().Allocate(batch * 5 * sizeof(float));
  EXPECT_TRUE(g.ok());
  TensorView grad(g->data(), {batch, 5});
  absl::StatusOr<LossResult> loss =
      SoftmaxCrossEntropy(model.device(), logits, labels.data(), &grad);
  EXPECT_TRUE(loss.ok());
  model.Backward(grad);
  Pass p;
  p.loss = loss->loss;
  p.logits.resize(batch * 5);
  p.grads.resize(model.grads().size());
  EXPECT_TRUE(model.device()
                  .CopyToHost(logits.data(), p.logits.data(), p.logits.size() * sizeof(float))
                  .ok());
  EXPECT_TRUE(model.device()
                  .CopyToHost(model.grads().data(), p.grads.data(), p.grads.size() * sizeof(float))
                  .ok());
  return p;
}

void ExpectClose(const std::vector<float>& want, const std::vector<float>& got, double rel) {
  ASSERT_EQ(want.size(), got.size());
  double scale = 0;
  for (float v : want) scale = std::max(scale, std::abs(static_cast<double>(v)));
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], rel * scale) << "index " << i;
  }
}

TEST(DevicePath, FakeDeviceGivesTheCpuResults) {
  CpuDevice cpu;
  testing::FakeDevice fake;
  const Pass a = RunOnce(&cpu, 9);
  const Pass b = RunOnce(&fake, 9);
  EXPECT_NEAR(a.loss, b.loss, 1e-5 * std::abs(a.loss));
  ExpectClose(a.logits, b.logits, 1e-5);
  ExpectClose(a.grads, b.grads, 1e-4);
  // Initialisation was staged through the host, not computed in place.
  EXPECT_GT(fake.copies_to_device(), 0);
}

TEST(DevicePath, ABatchThatDoesNotFitFailsInOneLineNamingTheBatchSize) {
  testing::FakeDevice fake;
  fake.set_memory({.total_bytes = int64_t{1} << 30, .free_bytes = int64_t{1} << 20});
  absl::StatusOr<std::unique_ptr<Model>> m = BuildModelFromSpec(kSpec, "test", std::nullopt, &fake);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE((*m)->Reserve(8).ok());  // about 30 KiB a sample
  const absl::Status s = (*m)->Reserve(4096);
  ASSERT_TRUE(absl::IsResourceExhausted(s)) << s;
  const std::string msg(s.message());
  EXPECT_NE(msg.find("batch 4096"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cuda:7"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--batch-size"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

}  // namespace
}  // namespace kubetrain::nn
