#include "runtime/tensor/cpu_device.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/tensor/blas.h"
#include "runtime/tensor/device.h"

namespace kubetrain {
namespace {

TEST(CpuDevice, BuffersAreAlignedHostMemory) {
  CpuDevice d;
  EXPECT_TRUE(d.host_memory());
  EXPECT_EQ(d.info().Id(), "cpu");
  absl::StatusOr<DeviceBuffer> b = d.Allocate(100 * sizeof(float));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % 64, 0u);
  EXPECT_EQ(b->floats(), 100);
  const std::vector<float> src(100, 2.5f);
  d.CopyToDevice(src.data(), b->data(), 100 * sizeof(float));
  d.Scale(b->data(), 100, 2.0f);
  std::vector<float> back(100);
  ASSERT_TRUE(d.CopyToHost(b->data(), back.data(), 100 * sizeof(float)).ok());
  EXPECT_EQ(back, std::vector<float>(100, 5.0f));
}

TEST(CpuDevice, GemmAndRowOpsMatchTheReference) {
  CpuDevice d;
  const int64_t m = 7, n = 5, k = 3;
  std::vector<float> a(m * k), b(k * n), c(m * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 5) - 2.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 3) * 0.5f;
  const std::vector<float> bias = {1, 2, 3, 4, 5};
  d.BroadcastRows(bias.data(), m, n, c.data());
  d.Gemm(Trans::kNo, Trans::kNo, m, n, k, 1.0f, a.data(), k, b.data(), n, 1.0f, c.data(), n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float want = bias[j];
      for (int64_t p = 0; p < k; ++p) want += a[i * k + p] * b[p * n + j];
      EXPECT_FLOAT_EQ(c[i * n + j], want);
    }
  }
  std::vector<float> sums(n);
  d.SumRows(c.data(), m, n, sums.data());
  for (int64_t j = 0; j < n; ++j) {
    float want = 0;
    for (int64_t i = 0; i < m; ++i) want += c[i * n + j];
    EXPECT_EQ(sums[j], want);
  }
}

// The fused dense ops (BlockedGemm where the CPU has it) against the
// composed default (BroadcastRows, OpenBLAS, ReLU, SumRows).
TEST(CpuDevice, FusedDenseOpsMatchTheComposedOnes) {
  CpuDevice d;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  auto random = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = u(rng);
    return v;
  };
  auto expect_near = [](const std::vector<float>& got, const std::vector<float>& want,
                        const char* what) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-4f * (1 + std::abs(want[i]))) << what << " at " << i;
    }
  };
  for (const DenseShape s : {DenseShape{.batch = 37, .inputs = 300, .units = 45, .relu = true},
                             DenseShape{.batch = 64, .inputs = 128, .units = 10, .relu = false},
                             DenseShape{.batch = 3, .inputs = 5, .units = 70, .relu = true}}) {
    const std::vector<float> x = random(s.batch * s.inputs), w = random(s.units * s.inputs),
                             bias = random(s.units), gy = random(s.batch * s.units);
    std::vector<float> y(gy.size()), y_want(gy.size());
    d.DenseForward(s, x.data(), w.data(), bias.data(), y.data());
    d.ComputeDevice::DenseForward(s, x.data(), w.data(), bias.data(), y_want.data());
    expect_near(y, y_want, "y");
    if (s.relu) {
      EXPECT_GT(std::count(y.begin(), y.end(), 0.0f), 0);
      EXPECT_EQ(std::count_if(y.begin(), y.end(), [](float v) { return v < 0; }), 0);
    }

    std::vector<float> masked(gy.size()), dw(w.size()), db(bias.size()), dx(x.size());
    std::vector<float> masked_want(gy.size()), dw_want(w.size()), db_want(bias.size()),
        dx_want(x.size());
    d.DenseBackward(s, x.data(), w.data(), y_want.data(), gy.data(), masked.data(), dw.data(),
                    db.data(), dx.data());
    d.ComputeDevice::DenseBackward(s, x.data(), w.data(), y_want.data(), gy.data(),
                                   masked_want.data(), dw_want.data(), db_want.data(),
                                   dx_want.data());
    expect_near(dw, dw_want, "dw");
    expect_near(dx, dx_want, "dx");
    EXPECT_EQ(db, db_want);  // the same sums in the same order
    if (s.relu) {
      EXPECT_EQ(masked, masked_want);
    }

    // Without dx (a model's first layer) the parameter gradients are the same.
    std::vector<float> dw2(w.size()), db2(bias.size());
    d.DenseBackward(s, x.data(), w.data(), y_want.data(), gy.data(), masked.data(), dw2.data(),
                    db2.data(), nullptr);
    EXPECT_EQ(dw2, dw);
    EXPECT_EQ(db2, db);
  }
}

TEST(CpuDevice, LossSumsRowLossesAndCountsCorrectRows) {
  CpuDevice d;
  const std::vector<float> logits = {0, 5, 0, /**/ 3, 0, 0};
  const std::vector<int32_t> labels = {1, 2};
  std::vector<float> grad(6);
  absl::StatusOr<LossSums> s =
      d.SoftmaxCrossEntropy(logits.data(), 2, 3, labels.data(), grad.data());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->correct, 1);
  EXPECT_GT(s->loss, 3.0);  // row 1 is confidently wrong
  float total = 0;
  for (float g : grad) total += g;
  EXPECT_NEAR(total, 0.0f, 1e-6);  // softmax - onehot sums to 0 per row
}

TEST(OpenComputeDevice, OpensTheCpuAndRefusesAnAbsentGpuInOneLine) {
  absl::StatusOr<DeviceInfo> cpu = SelectDevice("cpu");
  ASSERT_TRUE(cpu.ok());
  absl::StatusOr<std::unique_ptr<ComputeDevice>> d = OpenComputeDevice(*cpu, {});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE((*d)->host_memory());
  std::string why;
  const std::vector<DeviceInfo> all = ListDevices(&why);
  if (all.front().kind == DeviceKind::kCpu) {
    absl::StatusOr<DeviceInfo> gpu = SelectDevice("cuda");
    ASSERT_FALSE(gpu.ok());
    EXPECT_EQ(std::string(gpu.status().message()).find('\n'), std::string::npos);
    EXPECT_NE(std::string(gpu.status().message()).find("not available"), std::string::npos);
  }
}

}  // namespace
}  // namespace kubetrain
