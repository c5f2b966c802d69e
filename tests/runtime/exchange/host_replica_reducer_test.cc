#include "runtime/exchange/host_replica_reducer.h"

#include <vector>

#include "gtest/gtest.h"
#include "runtime/tensor/cpu_device.h"
#include "tests/support/fake_device.h"

namespace kubetrain::exchange {
namespace {

// Three replicas: a CPU device and two devices whose memory is not host
// memory (FakeDevice), so both the in-place and the copying paths run.
class HostReplicaReducerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    devices_ = {&cpu_, &fake_a_, &fake_b_};
    for (ComputeDevice* d : devices_) buffers_.push_back(*d->Allocate(kN * sizeof(float)));
    for (size_t r = 0; r < buffers_.size(); ++r) {
      for (int64_t i = 0; i < kN; ++i) {
        buffers_[r].data()[i] = static_cast<float>((r + 1) * 100 + i);
      }
      pointers_.push_back(buffers_[r].data());
    }
  }
  std::vector<float> Values(size_t r) const {
    return std::vector<float>(buffers_[r].data(), buffers_[r].data() + kN);
  }

  static constexpr int64_t kN = 5;
  CpuDevice cpu_;
  testing::FakeDevice fake_a_, fake_b_;
  std::vector<ComputeDevice*> devices_;
  std::vector<DeviceBuffer> buffers_;
  std::vector<float*> pointers_;
};

TEST_F(HostReplicaReducerTest, SumsIntoTheRootAndLeavesTheOthers) {
  HostReplicaReducer reducer(devices_);
  EXPECT_EQ(reducer.name(), "host");
  EXPECT_EQ(reducer.replicas(), 3);
  ASSERT_TRUE(reducer.Sum(/*root=*/1, pointers_, kN).ok());
  EXPECT_EQ(Values(1), (std::vector<float>{600, 603, 606, 609, 612}));
  EXPECT_EQ(Values(0), (std::vector<float>{100, 101, 102, 103, 104}));
  EXPECT_EQ(Values(2), (std::vector<float>{300, 301, 302, 303, 304}));
  // Gradients of the fake devices went through host copies.
  EXPECT_GE(fake_a_.copies_to_host(), 1);
  EXPECT_GE(fake_a_.copies_to_device(), 1);
}

TEST_F(HostReplicaReducerTest, BroadcastCopiesTheRootEverywhere) {
  HostReplicaReducer reducer(devices_);
  ASSERT_TRUE(reducer.Broadcast(/*root=*/2, pointers_, kN).ok());
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(Values(r), (std::vector<float>{300, 301, 302, 303, 304})) << "replica " << r;
  }
}

TEST_F(HostReplicaReducerTest, RefusesMismatchedArguments) {
  HostReplicaReducer reducer(devices_);
  std::vector<float*> two = {pointers_[0], pointers_[1]};
  absl::Status s = reducer.Sum(0, two, kN);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("2 buffers for 3 replicas"), std::string::npos) << s;
  s = reducer.Broadcast(3, pointers_, kN);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_EQ(Values(0), (std::vector<float>{100, 101, 102, 103, 104})) << "nothing written";
}

TEST(OpenReplicaReducer, CpuReplicasGetTheHostReducer) {
  CpuDevice a, b;
  absl::StatusOr<std::unique_ptr<ReplicaReducer>> r = OpenReplicaReducer({&a, &b});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->name(), "host");
  EXPECT_EQ((*r)->replicas(), 2);
  EXPECT_FALSE(OpenReplicaReducer({}).ok());
}

}  // namespace
}  // namespace kubetrain::exchange
