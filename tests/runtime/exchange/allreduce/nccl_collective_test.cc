// NCCL and the device-memory exchange on real GPUs (CTest label `gpu`; every
// case skips with the driver's reason without one). Collectives take device
// buffers: a world of one NCCL rank works; one rank per visible GPU sums and
// broadcasts like the reference; an AllreduceExchange on NCCL keeps every
// rank equal to one optimizer on the mean, bit for bit (the update's bits
// are the CPU's: kernels/optimizer_update.h); two ranks sharing a GPU train
// on the staged ring and end bit for bit where the host ring ends, and a
// forced NCCL there is refused. The CPU versions of these checks are
// device_exchange_test and collective_backend_test.
#include "runtime/exchange/allreduce/nccl_collective.h"

#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/exchange/allreduce/allreduce_exchange.h"
#include "runtime/tensor/device.h"
#include "tests/runtime/exchange/allreduce/exchange_test_util.h"

namespace kubetrain::allreduce {
namespace {

using ::testing::HasSubstr;
using testing_util::RankResult;
using testing_util::RankRunOptions;
using testing_util::RunRanks;

class NcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    for (const DeviceInfo& d : ListDevices(&why)) {
      if (d.kind == DeviceKind::kCuda) gpus_.push_back(d);
    }
    if (gpus_.empty()) GTEST_SKIP() << "no GPU on this machine: " << why;
  }
  // A ComputeDevice on visible GPU `i` (several may share one GPU).
  ComputeDevice& Open(size_t i) {
    absl::StatusOr<std::unique_ptr<ComputeDevice>> d = OpenComputeDevice(gpus_.at(i), {});
    EXPECT_TRUE(d.ok()) << d.status();
    devices_.push_back(*std::move(d));
    return *devices_.back();
  }
  std::vector<DeviceInfo> gpus_;
  std::vector<std::unique_ptr<ComputeDevice>> devices_;
};

TEST_F(NcclTest, AWorldOfOneSumsAndBroadcastsOnDeviceBuffers) {
  ComputeDevice& gpu = Open(0);
  absl::StatusOr<std::string> id = NcclCollective::NewUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  absl::StatusOr<std::unique_ptr<NcclCollective>> c =
      NcclCollective::Create(0, 1, *id, gpu, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  const int64_t n = 4099;
  std::vector<float> host(n);
  for (int64_t i = 0; i < n; ++i) host[i] = static_cast<float>(i % 17) * 0.5f;
  DeviceBuffer in = *gpu.Allocate(n * sizeof(float)), out = *gpu.Allocate(n * sizeof(float));
  gpu.CopyToDevice(host.data(), in.data(), n * sizeof(float));
  ASSERT_TRUE((*c)->AllreduceSum(in.data(), out.data(), n, nullptr).ok());
  ASSERT_TRUE((*c)->Broadcast(out.data(), n, 0, nullptr).ok());
  absl::StatusOr<int64_t> join = (*c)->Join();
  ASSERT_TRUE(join.ok()) << join.status();
  ASSERT_TRUE((*c)->WaitJoined(*join, nullptr).ok());
  std::vector<float> back(n);
  ASSERT_TRUE(gpu.CopyToHost(out.data(), back.data(), n * sizeof(float)).ok());
  EXPECT_EQ(back, host);
  EXPECT_EQ((*c)->bytes(), 2 * n * static_cast<int64_t>(sizeof(float)));
}

TEST_F(NcclTest, OneRankPerGpuSumsAndBroadcastsLikeTheReference) {
  const int world = static_cast<int>(gpus_.size());
  for (int r = 0; r < world; ++r) Open(static_cast<size_t>(r));
  absl::StatusOr<std::string> id = NcclCollective::NewUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  const int64_t n = (1 << 20) + 7;
  std::vector<std::vector<float>> data(world, std::vector<float>(n));
  std::vector<absl::Status> st(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      ComputeDevice& gpu = *devices_[r];
      absl::StatusOr<std::unique_ptr<NcclCollective>> c =
          NcclCollective::Create(r, world, *id, gpu, nullptr);
      if (!c.ok()) {
        st[r] = c.status();
        return;
      }
      for (int64_t i = 0; i < n; ++i) data[r][i] = static_cast<float>((r + 1) * (i % 11));
      DeviceBuffer d = *gpu.Allocate(n * sizeof(float)), b = *gpu.Allocate(n * sizeof(float));
      gpu.CopyToDevice(data[r].data(), d.data(), n * sizeof(float));
      std::vector<float> mine(n, static_cast<float>(r));
      gpu.CopyToDevice(mine.data(), b.data(), n * sizeof(float));
      st[r] = (*c)->AllreduceSum(d.data(), d.data(), n, nullptr);
      if (st[r].ok()) st[r] = (*c)->Broadcast(b.data(), n, 0, nullptr);
      absl::StatusOr<int64_t> join = (*c)->Join();
      if (st[r].ok()) st[r] = join.status();
      if (st[r].ok()) st[r] = (*c)->WaitJoined(*join, nullptr);
      if (st[r].ok()) st[r] = gpu.CopyToHost(d.data(), data[r].data(), n * sizeof(float));
      if (st[r].ok()) st[r] = gpu.CopyToHost(b.data(), mine.data(), n * sizeof(float));
      if (st[r].ok() && mine[n - 1] != 0.0f) st[r] = absl::InternalError("broadcast did not copy");
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
  const float ranks_sum = static_cast<float>(world * (world + 1) / 2);
  for (int r = 0; r < world; ++r) {
    for (int64_t i = 0; i < n; i += 4099) {
      ASSERT_EQ(data[r][i], ranks_sum * static_cast<float>(i % 11)) << "rank " << r << " at " << i;
    }
  }
}

void ExpectBitsEqual(const std::vector<float>& want, const std::vector<float>& got,
                     const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << what;
}

TEST_F(NcclTest, AnExchangeOnNcclEqualsOneOptimizerOnTheMeanBitForBit) {
  RankRunOptions run;
  run.world = static_cast<int>(gpus_.size());
  for (int r = 0; r < run.world; ++r) run.devices.push_back(&Open(static_cast<size_t>(r)));
  run.customize = [](int, AllreduceExchangeOptions& o) { o.backend = "nccl"; };
  std::vector<RankResult> res = RunRanks(run);
  const std::vector<float> want = testing_util::OneOptimizerOnTheMean(run.world, run.n, run.steps);
  for (int r = 0; r < run.world; ++r) {
    ASSERT_TRUE(res[r].status.ok()) << "rank " << r << ": " << res[r].status;
    EXPECT_EQ(res[r].name, "allreduce-nccl");
    ExpectBitsEqual(want, res[r].params, absl::StrCat("rank ", r));
  }
}

TEST_F(NcclTest, TwoRanksSharingAGpuTrainOnTheStagedRingBitForBitWithTheHostRing) {
  RankRunOptions host_run;
  host_run.steps = 100;
  std::vector<RankResult> host = RunRanks(host_run);
  RankRunOptions run;
  run.devices = {&Open(0), &Open(0)};
  run.steps = 100;
  std::vector<RankResult> gpu = RunRanks(run);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(host[r].status.ok()) << host[r].status;
    ASSERT_TRUE(gpu[r].status.ok()) << gpu[r].status;
    EXPECT_EQ(gpu[r].name, "allreduce-ring");
    EXPECT_TRUE(gpu[r].Logged("share GPU " + gpus_[0].uuid)) << "the fallback says why";
    ExpectBitsEqual(host[r].params, gpu[r].params, absl::StrCat("rank ", r, " after 100 steps"));
  }
}

TEST_F(NcclTest, AForcedNcclOnASharedGpuIsRefusedNamingIt) {
  RankRunOptions run;
  run.devices = {&Open(0), &Open(0)};
  run.customize = [](int, AllreduceExchangeOptions& o) { o.backend = "nccl"; };
  std::vector<RankResult> res = RunRanks(run);
  for (const RankResult& r : res) {
    EXPECT_EQ(r.status.code(), absl::StatusCode::kFailedPrecondition) << r.status;
    EXPECT_THAT(std::string(r.status.message()), HasSubstr("share GPU " + gpus_[0].uuid));
  }
}

}  // namespace
}  // namespace kubetrain::allreduce
