#include "runtime/tensor/device.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/tensor/blas.h"

namespace kubetrain {
namespace {

TEST(Device, CpuIsAlwaysTheLastCandidate) {
  std::vector<DeviceInfo> d = ListDevices();
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d.back().kind, DeviceKind::kCpu);
  EXPECT_EQ(d.back().Id(), "cpu");
  EXPECT_EQ(d.back().cores, AvailableCpus());
  for (size_t i = 0; i + 1 < d.size(); ++i) EXPECT_EQ(d[i].kind, DeviceKind::kCuda);
}

TEST(Device, SelectResolvesRequests) {
  EXPECT_EQ(SelectDevice("cpu")->kind, DeviceKind::kCpu);
  EXPECT_EQ(SelectDevice("auto")->Id(), ListDevices().front().Id());
  EXPECT_EQ(SelectDevice("tpu").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SelectDevice("cuda:x").status().code(), absl::StatusCode::kInvalidArgument);
  // A GPU index far beyond any machine is never there, and the error says why.
  absl::StatusOr<DeviceInfo> missing = SelectDevice("cuda:999");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(missing.status().message()), ::testing::HasSubstr("cuda:999"));
}

TEST(Device, SelectDevicesGivesCpuReplicas) {
  absl::StatusOr<std::vector<DeviceInfo>> three = SelectDevices("cpu", 0, 3);
  ASSERT_TRUE(three.ok()) << three.status();
  ASSERT_EQ(three->size(), 3u);
  for (const DeviceInfo& d : *three) EXPECT_EQ(d.Id(), "cpu");
  EXPECT_EQ(SelectDevices("cpu", 0, 1)->size(), 1u);
  // GPUs asked of the CPU, and counts out of range, are refused.
  absl::StatusOr<std::vector<DeviceInfo>> gpus_on_cpu = SelectDevices("cpu", 2, 1);
  EXPECT_EQ(gpus_on_cpu.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(gpus_on_cpu.status().message()), ::testing::HasSubstr("--gpus 2"));
  EXPECT_EQ(SelectDevices("cpu", -1, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SelectDevices("cpu", 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SelectDevices("tpu", 0, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Device, SelectDevicesDefaultsToEveryVisibleGpu) {
  std::vector<DeviceInfo> gpus = ListDevices();
  gpus.pop_back();  // the CPU
  absl::StatusOr<std::vector<DeviceInfo>> pod = SelectDevices("auto", 0, 1);
  ASSERT_TRUE(pod.ok()) << pod.status();
  if (gpus.empty()) {
    ASSERT_EQ(pod->size(), 1u);
    EXPECT_EQ(pod->front().Id(), "cpu");
    EXPECT_EQ(SelectDevices("cuda", 0, 1).status().code(), absl::StatusCode::kUnavailable);
    return;
  }
  ASSERT_EQ(pod->size(), gpus.size());
  for (size_t i = 0; i < gpus.size(); ++i) EXPECT_EQ((*pod)[i].Id(), gpus[i].Id());
  EXPECT_EQ(SelectDevices("cuda:0", 0, 1)->size(), 1u);
  absl::StatusOr<std::vector<DeviceInfo>> too_many =
      SelectDevices("cuda", static_cast<int>(gpus.size()) + 1, 1);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(too_many.status().message()), ::testing::HasSubstr("visible"));
  EXPECT_EQ(SelectDevices("cuda", 0, 2).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kubetrain
