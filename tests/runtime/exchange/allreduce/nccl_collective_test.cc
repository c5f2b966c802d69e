// NCCL backend (CTest label `gpu`): one rank per visible GPU, each on its own
// thread. Sums and broadcasts through NCCL equal the reference, and an
// AllreduceExchange picking NCCL (unique id through the rendezvous) keeps
// every rank identical. Skips with the driver's reason without a GPU.
#include "runtime/exchange/allreduce/nccl_collective.h"

#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/exchange/allreduce/allreduce_exchange.h"
#include "runtime/launcher/loopback_ports.h"
#include "runtime/tensor/cuda/cuda_runtime.h"

namespace kubetrain::allreduce {
namespace {

class NcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::vector<DeviceInfo>> d = cuda::ListCudaDevices();
    if (!d.ok()) GTEST_SKIP() << "no GPU on this machine: " << d.status().message();
    gpus_ = static_cast<int>(d->size());
  }
  int gpus_ = 0;
};

TEST_F(NcclTest, SumsAndBroadcastsMatchTheReference) {
  absl::StatusOr<std::string> id = NcclCollective::NewUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  const int world = gpus_;
  const int64_t n = (1 << 20) + 7;
  std::vector<std::vector<float>> data(world, std::vector<float>(n));
  std::vector<absl::Status> st(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<NcclCollective>> c = NcclCollective::Create(r, world, *id, r);
      if (!c.ok()) {
        st[r] = c.status();
        return;
      }
      for (int64_t i = 0; i < n; ++i) data[r][i] = static_cast<float>((r + 1) * (i % 11));
      st[r] = (*c)->AllreduceSum(data[r], nullptr);
      if (!st[r].ok()) return;
      std::vector<float> b(n, static_cast<float>(r));
      st[r] = (*c)->Broadcast(b, 0, nullptr);
      if (st[r].ok() && b[n - 1] != 0.0f) st[r] = absl::InternalError("broadcast did not copy");
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

TEST_F(NcclTest, AnExchangeOnNcclKeepsRanksIdentical) {
  const int world = gpus_;
  absl::StatusOr<std::vector<int>> port = launcher::AllocateLoopbackPorts(1);
  ASSERT_TRUE(port.ok());
  const int64_t n = 4099;
  std::vector<std::vector<float>> params(world, std::vector<float>(n));
  std::vector<absl::Status> st(world);
  std::vector<std::thread> threads;
  RealClock clock;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      AllreduceExchangeOptions o;
      o.rank = r;
      for (int i = 0; i < world; ++i) o.names.push_back(absl::StrCat("worker-", i));
      o.rendezvous_address = o.rendezvous_listen_address = absl::StrCat("127.0.0.1:", (*port)[0]);
      o.data_listen_host = o.data_advertise_host = "127.0.0.1";
      o.backend = "nccl";
      o.gpu_device = r;
      o.bucket_bytes = 4096;
      train::LrScheduleOptions lo;
      lo.kind = "constant";
      lo.base_lr = 0.1f;
      AllreduceExchange ex(o, *train::LrSchedule::Create(lo), clock, [](const std::string&) {});
      for (int64_t i = 0; i < n; ++i) params[r][i] = static_cast<float>(r);
      absl::StatusOr<int64_t> s = ex.Start(params[r]);
      if (!s.ok()) {
        st[r] = s.status();
        return;
      }
      if (ex.name() != "allreduce-nccl") st[r] = absl::InternalError(ex.name());
      std::vector<float> g(n, static_cast<float>(r + 1));
      for (int step = 0; step < 3 && st[r].ok(); ++step)
        st[r] = ex.Step(step, g, params[r]).status();
      if (st[r].ok()) st[r] = ex.Finish();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
  for (int r = 1; r < world; ++r) {
    EXPECT_EQ(std::memcmp(params[0].data(), params[r].data(), n * sizeof(float)), 0);
  }
  EXPECT_NE(params[0][0], 0.0f) << "the optimizer moved the parameters";
}

}  // namespace
}  // namespace kubetrain::allreduce
