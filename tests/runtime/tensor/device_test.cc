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

}  // namespace
}  // namespace kubetrain
