// Several device replicas in one pod (Trainer with PodReplicas, what
// `--gpus N` / `--cpu-replicas N` run): N replicas splitting a batch train
// the same parameters as one replica on the whole batch, stay identical to
// each other, and the pod hands the exchange one gradient per step.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "runtime/exchange/host_replica_reducer.h"
#include "runtime/exchange/local_exchange.h"
#include "runtime/exchange/staged_exchange.h"
#include "runtime/nn/model_spec.h"
#include "runtime/tensor/cpu_device.h"
#include "runtime/train/trainer.h"
#include "tests/support/fake_device.h"
#include "tests/support/quadrants_dataset.h"

namespace kubetrain::train {
namespace {

TEST(SplitBatch, SharesRowsInOrderWithTheRemainderFirst) {
  EXPECT_EQ(SplitBatch(10, 4), (std::vector<int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(SplitBatch(16, 2), (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(SplitBatch(2, 3), (std::vector<int64_t>{1, 1, 0}));
  EXPECT_EQ(SplitBatch(7, 1), (std::vector<int64_t>{7}));
}

// The built-in model `name` without its dropout layers.
std::string WithoutDropout(const std::string& name) {
  std::string spec = *nn::BuiltinModelSpec(name);
  std::istringstream in(spec);
  std::string out, line;
  while (std::getline(in, line)) {
    if (line.find("dropout") == std::string::npos) out += line + "\n";
  }
  return out;
}

enum class Kind { kCpu, kFake };

struct Pod {
  std::vector<std::unique_ptr<ComputeDevice>> devices;
  std::vector<std::unique_ptr<nn::Model>> models;
  std::unique_ptr<exchange::HostReplicaReducer> reducer;

  Pod(const std::string& spec, int replicas, Kind kind) {
    std::vector<ComputeDevice*> raw;
    for (int r = 0; r < replicas; ++r) {
      if (kind == Kind::kCpu) {
        devices.push_back(std::make_unique<CpuDevice>());
      } else {
        devices.push_back(std::make_unique<testing::FakeDevice>());
      }
      raw.push_back(devices.back().get());
      models.push_back(*nn::BuildModelFromSpec(spec, "test", std::nullopt, raw.back()));
    }
    reducer = std::make_unique<exchange::HostReplicaReducer>(raw);
  }
  PodReplicas replicas() {
    PodReplicas p;
    for (auto& m : models) p.models.push_back(m.get());
    p.reducer = reducer.get();
    return p;
  }
  std::vector<float> Params(size_t r) {
    nn::Model& m = *models[r];
    std::vector<float> host(m.params().size());
    EXPECT_TRUE(
        m.device().CopyToHost(m.params().data(), host.data(), m.params().size_bytes()).ok());
    return host;
  }
};

// Trains `spec` on `replicas` replicas with the pod batch `batch` for one
// epoch of `samples` samples (SGD with momentum on replica 0's device);
// returns replica 0's parameters and checks every replica holds the same.
std::vector<float> Train(const std::string& spec, int replicas, Kind kind, int64_t batch,
                         int samples, const Shape& shape) {
  data::Dataset train =
      testing::QuadrantsDataset(samples, 1, static_cast<int>(shape[0]), static_cast<int>(shape[2]));
  Pod pod(spec, replicas, kind);
  nn::Model& first = *pod.models[0];
  exchange::LocalExchange local(
      *optim::MakeOptimizer({.kind = "sgd", .momentum = 0.9f},
                            static_cast<size_t>(first.num_params()), &first.device()),
      *optim::LrSchedule::Create({.base_lr = 0.05f}));
  std::ostringstream out;
  ProgressReporter progress(out);
  FakeClock clock;
  Trainer t(pod.replicas(), local, train, nullptr,
            {.epochs = 1, .batch_size = batch, .seed = 3, .log_every_steps = 0}, progress, clock);
  absl::StatusOr<TrainResult> r = t.Run();
  EXPECT_TRUE(r.ok()) << r.status();
  std::vector<float> p0 = pod.Params(0);
  for (size_t i = 1; i < pod.models.size(); ++i) {
    EXPECT_EQ(pod.Params(i), p0) << "replica " << i << " differs from replica 0";
  }
  return p0;
}

// Each parameter within `rel` of the largest initial-scale magnitude.
void ExpectClose(const std::vector<float>& want, const std::vector<float>& got, double rel) {
  ASSERT_EQ(want.size(), got.size());
  double scale = 1e-30, worst = 0;
  for (float v : want) scale = std::max(scale, std::abs(static_cast<double>(v)));
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]));
  }
  EXPECT_LE(worst, rel * scale) << "largest difference " << worst << " of scale " << scale;
}

struct Case {
  std::string model;
  Kind kind;
};

class PodTraining : public ::testing::TestWithParam<Case> {};

TEST_P(PodTraining, TwoReplicasAtBatchBMatchOneReplicaAt2B) {
  const std::string spec = WithoutDropout(GetParam().model);
  const Shape shape = {28, 28, 1};
  // 6 steps of a pod batch of 16 (8 per replica), one step shorter (8).
  const std::vector<float> one = Train(spec, 1, GetParam().kind, 16, 88, shape);
  const std::vector<float> two = Train(spec, 2, GetParam().kind, 16, 88, shape);
  std::vector<float> init;
  {
    Pod fresh(spec, 1, Kind::kCpu);
    fresh.models[0]->InitParams(3);
    init = fresh.Params(0);
  }
  ASSERT_NE(one, init) << "training moved the parameters";
  ExpectClose(one, two, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Models, PodTraining,
                         ::testing::Values(Case{"mlp", Kind::kCpu}, Case{"mlp", Kind::kFake},
                                           Case{"cnn", Kind::kCpu}, Case{"cnn", Kind::kFake}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.model +
                                  (info.param.kind == Kind::kCpu ? "_cpu" : "_fake_device");
                         });

TEST(PodTraining, UnevenSplitsAndEmptyReplicasWeighRowsExactly) {
  // Pod batch 10 over 3 replicas (4, 3, 3); 52 samples end on a batch of 2
  // (1, 1, 0): the third replica sits that step out.
  const std::string spec =
      "input: [6, 6, 1]\nlayers: [flatten, {type: dense, units: 16}, relu, "
      "{type: dense, units: 4}]";
  const Shape shape = {6, 6, 1};
  const std::vector<float> one = Train(spec, 1, Kind::kCpu, 10, 52, shape);
  const std::vector<float> three = Train(spec, 3, Kind::kFake, 10, 52, shape);
  ExpectClose(one, three, 1e-5);
}

// Counts what reaches the pod's exchange; plain SGD.
class CountingExchange : public exchange::Exchange {
 public:
  std::string name() const override { return "counting"; }
  absl::StatusOr<int64_t> Start(std::span<float> params) override { return 0; }
  void GradientsReady(std::span<const float>, int64_t) override { ++ready_calls; }
  absl::StatusOr<int64_t> Step(int64_t step, std::span<const float> grads,
                               std::span<float> params) override {
    ++pushes;
    for (size_t i = 0; i < params.size(); ++i) params[i] -= 0.05f * grads[i];
    return step + 1;
  }
  absl::Status Finish() override {
    ++finishes;
    return absl::OkStatus();
  }
  int pushes = 0, ready_calls = 0, finishes = 0;
};

TEST(PodTraining, APodOfFourPushesOnceAStepThroughStaging) {
  // A host exchange (as a parameter-server client or the TCP ring is)
  // behind StagedExchange on replica 0's device.
  const std::string spec =
      "input: [6, 6, 1]\nlayers: [{type: conv2d, filters: 4, kernel: 3, padding: same}, relu,"
      " flatten, {type: dense, units: 4}]";
  data::Dataset train = testing::QuadrantsDataset(96, 1, 6, 1);
  Pod pod(spec, 4, Kind::kFake);
  CountingExchange host;
  std::unique_ptr<exchange::StagedExchange> staged =
      *exchange::StagedExchange::Create(host, pod.models[0]->device(), pod.models[0]->num_params());
  std::ostringstream out;
  ProgressReporter progress(out);
  FakeClock clock;
  Trainer t(pod.replicas(), *staged, train, nullptr,
            {.epochs = 2, .batch_size = 16, .seed = 3, .log_every_steps = 0}, progress, clock);
  absl::StatusOr<TrainResult> r = t.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 12);
  EXPECT_EQ(host.pushes, 12) << "one push per pod step, not one per replica";
  EXPECT_EQ(host.ready_calls, 0) << "no partial gradients before the pod's sum";
  EXPECT_EQ(host.finishes, 1);
  const std::vector<float> p0 = pod.Params(0);
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ(pod.Params(i), p0) << "replica " << i;
}

TEST(PodTraining, RefusesReplicasWithoutAReducerOrOfDifferentModels) {
  data::Dataset train = testing::QuadrantsDataset(16, 1, 6, 1);
  Pod pod("input: [6, 6, 1]\nlayers: [flatten, {type: dense, units: 4}]", 2, Kind::kCpu);
  CountingExchange host;
  std::ostringstream out;
  ProgressReporter progress(out);
  FakeClock clock;
  PodReplicas no_reducer = pod.replicas();
  no_reducer.reducer = nullptr;
  Trainer t(no_reducer, host, train, nullptr, {.epochs = 1, .batch_size = 8}, progress, clock);
  absl::StatusOr<TrainResult> r = t.Run();
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();

  std::unique_ptr<nn::Model> other = *nn::BuildModelFromSpec(
      "input: [6, 6, 1]\nlayers: [flatten, {type: dense, units: 5}]", "test", std::nullopt);
  PodReplicas mixed = pod.replicas();
  mixed.models[1] = other.get();
  Trainer t2(mixed, host, train, nullptr, {.epochs = 1, .batch_size = 8}, progress, clock);
  r = t2.Run();
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_EQ(host.pushes, 0);
}

}  // namespace
}  // namespace kubetrain::train
