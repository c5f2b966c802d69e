// GPU tests (CTest label `gpu`): skip with a clear message on machines
// without a usable GPU.
#include "runtime/tensor/cuda/cuda_runtime.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace kubetrain::cuda {
namespace {

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::vector<DeviceInfo>> d = ListCudaDevices();
    if (!d.ok()) GTEST_SKIP() << "no GPU on this machine: " << d.status().message();
    gpus_ = *d;
  }
  std::vector<DeviceInfo> gpus_;
};

TEST_F(CudaTest, DevicesReportNameAndMemory) {
  for (const DeviceInfo& g : gpus_) {
    EXPECT_FALSE(g.name.empty());
    EXPECT_GT(g.memory_bytes, 0);
    EXPECT_GT(g.cores, 0);
    EXPECT_EQ(g.Id(), "cuda:" + std::to_string(g.index));
  }
}

TEST_F(CudaTest, CublasGemmMatchesOpenBlasForEveryTransposition) {
  const int64_t m = 67, n = 45, k = 33;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      const int64_t lda = ta ? m : k, ldb = tb ? k : n;
      std::vector<float> a((ta ? k : m) * lda), b((tb ? n : k) * ldb), c(m * n);
      for (float& x : a) x = d(rng);
      for (float& x : b) x = d(rng);
      for (float& x : c) x = d(rng);
      std::vector<float> want = c;
      const Trans tra = ta ? Trans::kYes : Trans::kNo, trb = tb ? Trans::kYes : Trans::kNo;
      Gemm(tra, trb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 2.0f, want.data(), n);
      ASSERT_TRUE(GemmOnDevice(gpus_[0].index, tra, trb, m, n, k, 0.5f, a.data(), lda, b.data(),
                               ldb, 2.0f, c.data(), n)
                      .ok());
      for (size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], want[i], 1e-3) << ta << tb << i;
    }
  }
}

}  // namespace
}  // namespace kubetrain::cuda
