// AllreduceExchange with its tensors in a device's memory (FakeDevice: the
// GPU code paths computed on the CPU): the ring staged through pinned
// buffers, and a DeviceCollective where NCCL would be, both end bit for bit
// where the host ring ends, equal to one optimizer on the mean gradient,
// and neither waits on the device inside a step. The same comparison on a
// real GPU is nccl_collective_test's (label gpu).
#include <cstring>

#include "gtest/gtest.h"
#include "runtime/exchange/allreduce/allreduce_exchange.h"
#include "runtime/exchange/checkpoint.h"
#include "tests/runtime/exchange/allreduce/exchange_test_util.h"
#include "tests/runtime/exchange/allreduce/ring_test_util.h"
#include "tests/support/fake_device.h"
#include "tests/support/temp_files.h"

namespace kubetrain::allreduce {
namespace {

using testing_util::RankResult;
using testing_util::RankRunOptions;
using testing_util::RingBackedDeviceCollective;
using testing_util::RunRanks;

void ExpectBitsEqual(const std::vector<float>& want, const std::vector<float>& got,
                     const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << what;
}

class DeviceExchange : public ::testing::TestWithParam<int> {};

TEST_P(DeviceExchange, TheStagedRingEndsWhereTheHostRingDoesWithoutWaitingInASteps) {
  const int world = GetParam();
  RankRunOptions host_run;
  host_run.world = world;
  std::vector<RankResult> host = RunRanks(host_run);

  std::vector<testing::FakeDevice> gpus(static_cast<size_t>(world));
  RankRunOptions run;
  run.world = world;
  for (testing::FakeDevice& g : gpus) {
    g.set_uuid("GPU-shared");  // one GPU for every rank: the ring
    run.devices.push_back(&g);
  }
  std::vector<int> waits_after_first(static_cast<size_t>(world), -1),
      waits_after_last(static_cast<size_t>(world), -1);
  run.after_step = [&](int r, int s) {
    if (s == 0) waits_after_first[static_cast<size_t>(r)] = gpus[static_cast<size_t>(r)].waits();
    if (s == run.steps - 1) {
      waits_after_last[static_cast<size_t>(r)] = gpus[static_cast<size_t>(r)].waits();
    }
  };
  std::vector<RankResult> staged = RunRanks(run);

  const std::vector<float> want = testing_util::OneOptimizerOnTheMean(world, run.n, run.steps);
  for (int r = 0; r < world; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    ASSERT_TRUE(host[r].status.ok()) << host[r].status;
    ASSERT_TRUE(staged[r].status.ok()) << staged[r].status;
    EXPECT_EQ(staged[r].name, "allreduce-ring");
    EXPECT_TRUE(staged[r].Logged("staged through pinned memory"));
    ExpectBitsEqual(host[r].params, staged[r].params, "staged ring against the host ring");
    ExpectBitsEqual(want, staged[r].params, "staged ring against one optimizer");
    // Buckets go to pinned memory and the sum comes back as queued copies;
    // nothing in steps 2..N waits for the device.
    EXPECT_GT(gpus[static_cast<size_t>(r)].queued_copies(), run.steps);
    EXPECT_EQ(waits_after_first[static_cast<size_t>(r)], waits_after_last[static_cast<size_t>(r)]);
  }
}

TEST_P(DeviceExchange, ADeviceCollectiveEndsWhereTheHostRingDoes) {
  const int world = GetParam();
  std::vector<testing::FakeDevice> gpus(static_cast<size_t>(world));
  std::vector<std::unique_ptr<RingAllreduce>> rings = testing_util::MakeRing(world);
  std::vector<std::atomic<int64_t>> waits(static_cast<size_t>(world));
  RankRunOptions run;
  run.world = world;
  for (int r = 0; r < world; ++r) {
    gpus[static_cast<size_t>(r)].set_uuid(absl::StrCat("GPU-", r));  // a GPU each: "NCCL"
    run.devices.push_back(&gpus[static_cast<size_t>(r)]);
  }
  std::vector<int> waits_after_first(static_cast<size_t>(world), -1),
      waits_after_last(static_cast<size_t>(world), -1);
  run.after_step = [&](int r, int s) {
    if (s == 0) waits_after_first[static_cast<size_t>(r)] = gpus[static_cast<size_t>(r)].waits();
    if (s == run.steps - 1) {
      waits_after_last[static_cast<size_t>(r)] = gpus[static_cast<size_t>(r)].waits();
    }
  };
  run.customize = [&](int, AllreduceExchangeOptions& o) {
    o.device_collective_for_test = [&](int rank, int, const std::string&) {
      return absl::StatusOr<std::unique_ptr<DeviceCollective>>(
          std::make_unique<RingBackedDeviceCollective>(std::move(rings[rank]),
                                                       &waits[static_cast<size_t>(rank)]));
    };
  };
  std::vector<RankResult> res = RunRanks(run);
  const std::vector<float> want = testing_util::OneOptimizerOnTheMean(world, run.n, run.steps);
  for (int r = 0; r < world; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    ASSERT_TRUE(res[r].status.ok()) << res[r].status;
    EXPECT_EQ(res[r].name, "allreduce-nccl");
    ExpectBitsEqual(want, res[r].params, "device collective against one optimizer");
    EXPECT_EQ(waits_after_first[static_cast<size_t>(r)], waits_after_last[static_cast<size_t>(r)]);
    // The communication thread watched every step's join (and Start's and
    // Finish's waited on their own).
    EXPECT_GE(waits[static_cast<size_t>(r)].load(), run.steps);
  }
}

// SIGTERM with the parameters in a device's memory: CheckpointNow on rank 0
// (after the communication thread saw the last step's collectives finish,
// with the device collective) writes host copies of exactly the parameters
// every rank ends with; the other ranks write none.
TEST_P(DeviceExchange, CheckpointNowWritesTheDevicesParameters) {
  const int world = GetParam();
  for (const bool collective : {false, true}) {
    SCOPED_TRACE(collective ? "device collective" : "staged ring");
    data::testing_util::TempDir dir;
    std::vector<testing::FakeDevice> gpus(static_cast<size_t>(world));
    std::vector<std::unique_ptr<RingAllreduce>> rings = testing_util::MakeRing(world);
    std::vector<std::atomic<int64_t>> waits(static_cast<size_t>(world));
    RankRunOptions run;
    run.world = world;
    for (int r = 0; r < world; ++r) {
      // A GPU each ("NCCL"), or one shared by every rank (the staged ring).
      gpus[static_cast<size_t>(r)].set_uuid(collective ? absl::StrCat("GPU-", r) : "GPU-shared");
      run.devices.push_back(&gpus[static_cast<size_t>(r)]);
    }
    run.customize = [&](int, AllreduceExchangeOptions& o) {
      o.checkpoint_dir = dir.path();
      o.checkpoint_every_steps = 1000;
      o.checkpoint_every_seconds = 0;
      o.total_steps = 100;
      if (collective) {
        o.device_collective_for_test = [&](int rank, int, const std::string&) {
          return absl::StatusOr<std::unique_ptr<DeviceCollective>>(
              std::make_unique<RingBackedDeviceCollective>(std::move(rings[rank]),
                                                           &waits[static_cast<size_t>(rank)]));
        };
      }
    };
    std::vector<std::string> paths(static_cast<size_t>(world), "unset");
    run.before_finish = [&](int r, AllreduceExchange& ex, std::span<const float> params) {
      absl::StatusOr<std::string> path = ex.CheckpointNow(run.steps, params);
      ASSERT_TRUE(path.ok()) << path.status();
      paths[static_cast<size_t>(r)] = *path;
    };
    std::vector<RankResult> res = RunRanks(run);
    for (int r = 0; r < world; ++r) ASSERT_TRUE(res[r].status.ok()) << res[r].status;
    for (int r = 1; r < world; ++r) EXPECT_EQ(paths[static_cast<size_t>(r)], "");
    absl::StatusOr<exchange::CheckpointData> ckpt =
        exchange::LoadLatestCheckpoint(dir.path(), 0, 1, [](const std::string&) {});
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    EXPECT_EQ(ckpt->path, paths[0]);
    EXPECT_EQ(ckpt->header.global_step(), run.steps);
    ExpectBitsEqual(res[0].params, ckpt->params, "checkpoint against rank 0's parameters");
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, DeviceExchange, ::testing::Values(2, 3));

}  // namespace
}  // namespace kubetrain::allreduce
