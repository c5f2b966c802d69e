// Which allreduce backend a world gets (collective_backend.h): NCCL only
// when every rank has a GPU of its own; ranks that share one fall back to
// the ring and say why; a forced NCCL on a shared GPU is refused at once,
// naming the device, as a permanent error; a world of one runs on every
// backend. Runs everywhere: the GPUs are FakeDevices with UUIDs, and a
// ring-backed DeviceCollective stands in for NCCL.
#include "runtime/exchange/allreduce/collective_backend.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/runtime/exchange/allreduce/exchange_test_util.h"
#include "tests/runtime/exchange/allreduce/ring_test_util.h"
#include "tests/support/fake_device.h"

namespace kubetrain::allreduce {
namespace {

using ::testing::HasSubstr;
using testing_util::RankResult;
using testing_util::RankRunOptions;
using testing_util::RingBackedDeviceCollective;
using testing_util::RunRanks;

const std::string kGpuA = "GPU-aaaaaaaa-0000-0000-0000-000000000001";
const std::string kGpuB = "GPU-bbbbbbbb-0000-0000-0000-000000000002";

absl::StatusOr<BackendChoice> Choose(const std::string& requested,
                                     const std::vector<RankDevice>& world, bool compiled = true,
                                     bool have_id = true) {
  return ChooseCollectiveBackend(requested, compiled, world, have_id);
}

TEST(CollectiveBackend, NcclWhenEveryRankHasAGpuOfItsOwn) {
  absl::StatusOr<BackendChoice> c = Choose("auto", {{"worker-0", kGpuA}, {"worker-1", kGpuB}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->backend, "nccl");
  EXPECT_THAT(c->reason, HasSubstr("GPU of its own"));
}

TEST(CollectiveBackend, RanksSharingAGpuFallBackToTheRingSayingWhich) {
  absl::StatusOr<BackendChoice> c =
      Choose("auto", {{"worker-0", kGpuA}, {"worker-1", kGpuB}, {"worker-2", kGpuA}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->backend, "ring");
  EXPECT_THAT(c->reason, HasSubstr("worker-0 and worker-2 share GPU " + kGpuA));
}

TEST(CollectiveBackend, HostTensorsNoCudaOrNoIdMeanTheRing) {
  absl::StatusOr<BackendChoice> host = Choose("auto", {{"chief-0", kGpuA}, {"worker-0", ""}});
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(host->backend, "ring");
  EXPECT_THAT(host->reason, HasSubstr("worker-0's tensors are in host memory"));
  absl::StatusOr<BackendChoice> no_cuda =
      Choose("auto", {{"worker-0", kGpuA}, {"worker-1", kGpuB}}, /*compiled=*/false);
  ASSERT_TRUE(no_cuda.ok());
  EXPECT_EQ(no_cuda->backend, "ring");
  EXPECT_THAT(no_cuda->reason, HasSubstr("no CUDA"));
  absl::StatusOr<BackendChoice> no_id =
      Choose("auto", {{"worker-0", kGpuA}, {"worker-1", kGpuB}}, true, /*have_id=*/false);
  ASSERT_TRUE(no_id.ok());
  EXPECT_EQ(no_id->backend, "ring");
  EXPECT_THAT(no_id->reason, HasSubstr("no NCCL id"));
}

TEST(CollectiveBackend, OneRankNeedsNoCommunicatorUnlessOneIsNamed) {
  absl::StatusOr<BackendChoice> solo = Choose("auto", {{"worker-0", kGpuA}});
  ASSERT_TRUE(solo.ok());
  EXPECT_EQ(solo->backend, "ring");
  EXPECT_THAT(solo->reason, HasSubstr("nothing to exchange"));
  absl::StatusOr<BackendChoice> named = Choose("nccl", {{"worker-0", kGpuA}});
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->backend, "nccl");
}

TEST(CollectiveBackend, AForcedNcclThatCannotRunIsAPermanentErrorNamingWhy) {
  absl::StatusOr<BackendChoice> shared = Choose("nccl", {{"worker-0", kGpuA}, {"worker-1", kGpuA}});
  ASSERT_FALSE(shared.ok());
  EXPECT_EQ(shared.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(shared.status().message()),
              HasSubstr("worker-0 and worker-1 share GPU " + kGpuA));
  EXPECT_EQ(Choose("nccl", {{"worker-0", ""}}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Choose("gloo", {{"worker-0", ""}}).status().code(), absl::StatusCode::kInvalidArgument);
  // A rank alone refuses what it can already tell is impossible.
  EXPECT_EQ(CheckRequestedBackend("nccl", true, /*tensors_on_gpu=*/false).code(),
            absl::StatusCode::kFailedPrecondition);
  // A build without CUDA refuses nccl whatever the tensors.
  absl::Status no_cuda = CheckRequestedBackend("nccl", /*nccl_compiled_in=*/false, true);
  EXPECT_EQ(no_cuda.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(no_cuda.message()), HasSubstr("this build has no CUDA"));
  EXPECT_TRUE(CheckRequestedBackend("nccl", true, true).ok());
  EXPECT_TRUE(CheckRequestedBackend("ring", false, false).ok());
  EXPECT_EQ(CheckRequestedBackend("mpi", true, true).code(), absl::StatusCode::kInvalidArgument);
}

// Two ranks on one GPU (kubetrain run on a one-GPU workstation): the world
// forms, both log why NCCL was passed over, and they train on the ring.
TEST(CollectiveBackendExchange, TwoRanksOnOneGpuTrainOnTheRingAndSayWhy) {
  testing::FakeDevice a, b;
  a.set_uuid(kGpuA);
  b.set_uuid(kGpuA);
  RankRunOptions run;
  run.devices = {&a, &b};
  run.steps = 2;
  // NCCL would be possible but for the shared GPU.
  std::vector<std::unique_ptr<RingAllreduce>> rings = testing_util::MakeRing(2);
  run.customize = [&](int, AllreduceExchangeOptions& o) {
    o.device_collective_for_test = [&](int rank, int, const std::string&) {
      return absl::StatusOr<std::unique_ptr<DeviceCollective>>(
          std::make_unique<RingBackedDeviceCollective>(std::move(rings[rank])));
    };
  };
  std::vector<RankResult> res = RunRanks(run);
  for (const RankResult& r : res) {
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.name, "allreduce-ring");
    EXPECT_TRUE(r.Logged("allreduce backend ring: worker-0 and worker-1 share GPU " + kGpuA));
  }
}

// The same world asking for NCCL: every rank refuses at once, naming the
// shared device, with a permanent error (train_command exits 1 for it, not
// the lost-peer 129).
TEST(CollectiveBackendExchange, AForcedNcclOnASharedGpuIsRefusedByEveryRank) {
  testing::FakeDevice a, b;
  a.set_uuid(kGpuA);
  b.set_uuid(kGpuA);
  RankRunOptions run;
  run.devices = {&a, &b};
  run.customize = [&](int, AllreduceExchangeOptions& o) {
    o.backend = "nccl";
    o.device_collective_for_test = [](int, int, const std::string&) {
      return absl::StatusOr<std::unique_ptr<DeviceCollective>>(
          absl::InternalError("the communicator must not be made"));
    };
  };
  std::vector<RankResult> res = RunRanks(run);
  for (const RankResult& r : res) {
    EXPECT_EQ(r.status.code(), absl::StatusCode::kFailedPrecondition) << r.status;
    EXPECT_THAT(std::string(r.status.message()),
                HasSubstr("--allreduce-backend nccl: worker-0 and worker-1 share GPU " + kGpuA));
  }
}

// A world of one trains on every backend, and as one optimizer would.
TEST(CollectiveBackendExchange, AWorldOfOneWorksOnEveryBackend) {
  const std::vector<float> want = testing_util::OneOptimizerOnTheMean(1, 1003, 5);
  for (const std::string backend : {"auto", "ring", "nccl"}) {
    SCOPED_TRACE(backend);
    testing::FakeDevice gpu;
    gpu.set_uuid(kGpuA);
    std::vector<std::unique_ptr<RingAllreduce>> rings = testing_util::MakeRing(1);
    bool made = false;
    RankRunOptions run;
    run.world = 1;
    run.devices = {&gpu};
    run.customize = [&](int, AllreduceExchangeOptions& o) {
      o.backend = backend;
      o.device_collective_for_test = [&](int rank, int world, const std::string& id) {
        made = true;
        EXPECT_EQ(world, 1);
        EXPECT_FALSE(id.empty()) << "rank 0 makes an id for a world of one too";
        return absl::StatusOr<std::unique_ptr<DeviceCollective>>(
            std::make_unique<RingBackedDeviceCollective>(std::move(rings[rank])));
      };
    };
    std::vector<RankResult> res = RunRanks(run);
    ASSERT_TRUE(res[0].status.ok()) << res[0].status;
    EXPECT_EQ(res[0].name, backend == "nccl" ? "allreduce-nccl" : "allreduce-ring");
    EXPECT_EQ(made, backend == "nccl");
    EXPECT_EQ(res[0].params, want);
  }
}

}  // namespace
}  // namespace kubetrain::allreduce
