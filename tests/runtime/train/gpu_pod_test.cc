// Several GPUs in one pod (CTest label `gpu`): the NCCL replica reducer
// sums and broadcasts device buffers across 2 GPUs, and a pod of 2 GPUs at
// a batch of B per GPU trains the same parameters as 1 GPU at 2B (mlp and
// cnn, dropout off). Without two usable GPUs every case skips, saying why
// (the driver's reason, or how many GPUs are visible).
#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/exchange/local_exchange.h"
#include "runtime/exchange/replica_reducer.h"
#include "runtime/nn/model_spec.h"
#include "runtime/tensor/device.h"
#include "runtime/train/trainer.h"
#include "tests/support/quadrants_dataset.h"

namespace kubetrain::train {
namespace {

class GpuPod : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<DeviceInfo> any = SelectDevice("cuda");
    if (!any.ok()) GTEST_SKIP() << "no GPU on this machine: " << any.status().message();
    absl::StatusOr<std::vector<DeviceInfo>> gpus = SelectDevices("cuda", 2, 1);
    if (!gpus.ok()) {
      GTEST_SKIP() << "fewer than 2 GPUs on this machine: " << gpus.status().message();
    }
    for (const DeviceInfo& info : *gpus) {
      absl::StatusOr<std::unique_ptr<ComputeDevice>> d = OpenComputeDevice(info, {});
      if (!d.ok()) GTEST_SKIP() << "no GPU on this machine: " << d.status().message();
      gpus_.push_back(*std::move(d));
    }
  }
  std::vector<ComputeDevice*> Devices(size_t n) {
    std::vector<ComputeDevice*> d;
    for (size_t i = 0; i < n; ++i) d.push_back(gpus_[i].get());
    return d;
  }
  std::vector<std::unique_ptr<ComputeDevice>> gpus_;
};

std::vector<float> ToHost(ComputeDevice& d, const float* p, size_t n) {
  std::vector<float> host(n);
  EXPECT_TRUE(d.CopyToHost(p, host.data(), n * sizeof(float)).ok());
  return host;
}

TEST_F(GpuPod, NcclReducerSumsAndBroadcastsDeviceBuffers) {
  absl::StatusOr<std::unique_ptr<exchange::ReplicaReducer>> reducer =
      exchange::OpenReplicaReducer(Devices(2));
  ASSERT_TRUE(reducer.ok()) << reducer.status();
  EXPECT_EQ((*reducer)->name(), "nccl");
  const size_t n = 1000;
  std::vector<DeviceBuffer> bufs;
  std::vector<float*> ptrs;
  for (size_t r = 0; r < 2; ++r) {
    bufs.push_back(*gpus_[r]->Allocate(n * sizeof(float)));
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((r + 1) * 1000 + i);
    gpus_[r]->CopyToDevice(v.data(), bufs[r].data(), n * sizeof(float));
    ptrs.push_back(bufs[r].data());
  }
  ASSERT_TRUE((*reducer)->Sum(0, ptrs, static_cast<int64_t>(n)).ok());
  const std::vector<float> sum = ToHost(*gpus_[0], ptrs[0], n);
  const std::vector<float> untouched = ToHost(*gpus_[1], ptrs[1], n);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(sum[i], static_cast<float>(3000 + 2 * i)) << i;
    ASSERT_EQ(untouched[i], static_cast<float>(2000 + i)) << i;
  }
  ASSERT_TRUE((*reducer)->Broadcast(0, ptrs, static_cast<int64_t>(n)).ok());
  EXPECT_EQ(ToHost(*gpus_[1], ptrs[1], n), sum);
}

std::string WithoutDropout(const std::string& name) {
  std::istringstream in(*nn::BuiltinModelSpec(name));
  std::string out, line;
  while (std::getline(in, line)) {
    if (line.find("dropout") == std::string::npos) out += line + "\n";
  }
  return out;
}

// One epoch of `samples` at the pod batch `batch` on `devices` (SGD with
// momentum on the first); replica 0's parameters, after checking that
// every replica holds the same.
std::vector<float> Train(const std::string& spec, std::vector<ComputeDevice*> devices,
                         int64_t batch, int samples) {
  data::Dataset train = testing::QuadrantsDataset(samples, 1, 28, 1);
  std::vector<std::unique_ptr<nn::Model>> models;
  PodReplicas pod;
  for (ComputeDevice* d : devices) {
    models.push_back(*nn::BuildModelFromSpec(spec, "test", std::nullopt, d));
    pod.models.push_back(models.back().get());
  }
  std::unique_ptr<exchange::ReplicaReducer> reducer;
  if (devices.size() > 1) {
    reducer = *exchange::OpenReplicaReducer(devices);
    pod.reducer = reducer.get();
  }
  exchange::LocalExchange local(
      *optim::MakeOptimizer({.kind = "sgd", .momentum = 0.9f},
                            static_cast<size_t>(models[0]->num_params()), devices[0]),
      *optim::LrSchedule::Create({.base_lr = 0.05f}));
  std::ostringstream out;
  ProgressReporter progress(out);
  FakeClock clock;
  Trainer t(pod, local, train, nullptr,
            {.epochs = 1, .batch_size = batch, .seed = 3, .log_every_steps = 0}, progress, clock);
  absl::StatusOr<TrainResult> r = t.Run();
  EXPECT_TRUE(r.ok()) << r.status();
  const size_t n = static_cast<size_t>(models[0]->num_params());
  std::vector<float> p0 = ToHost(*devices[0], models[0]->params().data(), n);
  for (size_t i = 1; i < models.size(); ++i) {
    EXPECT_EQ(ToHost(*devices[i], models[i]->params().data(), n), p0) << "replica " << i;
  }
  return p0;
}

TEST_F(GpuPod, TwoGpusAtBatchBMatchOneGpuAt2B) {
  for (const std::string model : {"mlp", "cnn"}) {
    const std::string spec = WithoutDropout(model);
    // 8 steps of 64 (32 per GPU).
    const std::vector<float> one = Train(spec, Devices(1), 64, 512);
    const std::vector<float> two = Train(spec, Devices(2), 64, 512);
    ASSERT_EQ(one.size(), two.size()) << model;
    double scale = 1e-30, worst = 0;
    for (float v : one) scale = std::max(scale, std::abs(static_cast<double>(v)));
    for (size_t i = 0; i < one.size(); ++i) {
      worst = std::max(worst, std::abs(static_cast<double>(two[i]) - one[i]));
    }
    EXPECT_LE(worst, 1e-4 * scale) << model << ": largest difference " << worst << " of " << scale;
  }
}

}  // namespace
}  // namespace kubetrain::train
