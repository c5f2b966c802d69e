// Training on a device without host memory (FakeDevice: a GPU's code paths
// computed on the CPU): the local optimizer on the device, and a host
// exchange behind StagedExchange, follow the CPU's loss curve; the data set
// stays on the device and a step neither copies from the host nor waits.
#include <cmath>
#include <sstream>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/exchange/local_exchange.h"
#include "runtime/exchange/staged_exchange.h"
#include "runtime/nn/model_spec.h"
#include "runtime/train/trainer.h"
#include "tests/support/fake_device.h"
#include "tests/support/progress_text.h"
#include "tests/support/quadrants_dataset.h"

namespace kubetrain::train {
namespace {

data::Dataset Quadrants(int n, uint64_t seed) {
  return testing::QuadrantsDataset(n, seed, /*side=*/6, /*channels=*/1);
}

constexpr char kSpec[] = R"(
layers:
  - {type: conv2d, filters: 4, kernel: 3, padding: same}
  - relu
  - {type: maxpool2d, size: 2}
  - flatten
  - {type: dropout, rate: 0.1}
  - {type: dense, units: 8}
  - relu
  - {type: dense, units: 4}
)";

enum class Exchange { kLocalOnDevice, kStagedHost };

// The progress lines' loss every 10 steps of 100.
std::vector<double> LossCurve(ComputeDevice& device, Exchange how, double* test_accuracy) {
  data::Dataset train = Quadrants(400, 1), test = Quadrants(100, 2);
  std::unique_ptr<nn::Model> model =
      *nn::BuildModelFromSpec(kSpec, "test", Shape{6, 6, 1}, &device);
  const size_t n = static_cast<size_t>(model->num_params());
  const optim::LrSchedule schedule = *optim::LrSchedule::Create({.base_lr = 0.05f});
  const bool on_device = how == Exchange::kLocalOnDevice;
  exchange::LocalExchange local(
      *optim::MakeOptimizer({.kind = "sgd"}, n, on_device ? &device : nullptr), schedule);
  std::unique_ptr<exchange::StagedExchange> staged;
  if (!on_device) staged = *exchange::StagedExchange::Create(local, device, model->num_params());
  std::ostringstream out;
  ProgressReporter progress(out);
  FakeClock clock;
  Trainer t(*model, on_device ? static_cast<exchange::Exchange&>(local) : *staged, train, &test,
            {.epochs = 5, .batch_size = 20, .seed = 3, .log_every_steps = 10}, progress, clock);
  absl::StatusOr<TrainResult> r = t.Run();
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  *test_accuracy = r->test.accuracy;
  return testing::LossCurveOf(out.str());
}

TEST(DeviceTraining, LocalOptimizerOnTheDeviceFollowsTheCpuCurve) {
  CpuDevice cpu;
  testing::FakeDevice fake;
  double acc_cpu = 0, acc_dev = 0;
  const std::vector<double> want = LossCurve(cpu, Exchange::kLocalOnDevice, &acc_cpu);
  const std::vector<double> got = LossCurve(fake, Exchange::kLocalOnDevice, &acc_dev);
  ASSERT_EQ(want.size(), 10u);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-3) << "point " << i;
  EXPECT_LT(want.back(), want.front() / 2) << "it learns";
  EXPECT_NEAR(acc_dev, acc_cpu, 0.02);
}

TEST(DeviceTraining, HostExchangeThroughStagingFollowsTheCpuCurve) {
  CpuDevice cpu;
  testing::FakeDevice fake;
  double acc_cpu = 0, acc_dev = 0;
  const std::vector<double> want = LossCurve(cpu, Exchange::kLocalOnDevice, &acc_cpu);
  const std::vector<double> got = LossCurve(fake, Exchange::kStagedHost, &acc_dev);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-3) << "point " << i;
  // Gradients went to the host and parameters came back every step, as
  // queued copies.
  EXPECT_GE(fake.queued_copies(), 200);
}

// On a device with its own memory the data set is uploaded once and each
// step gathers its batch there, and the loss is summed there and read only
// for a progress line or an epoch: over 100 steps the device's queue is
// waited for and copied to from the host a few times an epoch, not once or
// more a step (which was 3 waits and 2 copies a step before).
TEST(DeviceTraining, AStepCopiesNothingFromTheHostAndWaitsOnlyForItsLines) {
  testing::FakeDevice fake;
  double acc = 0;
  const std::vector<double> curve = LossCurve(fake, Exchange::kLocalOnDevice, &acc);
  ASSERT_EQ(curve.size(), 10u);
  // 5 epochs: an order upload and an evaluation each, 10 progress lines.
  EXPECT_LT(fake.copies_to_device(), 40);
  EXPECT_LT(fake.waits(), 40);
  EXPECT_GT(acc, 0.5);
}

// A run's outcome, to compare runs bit for bit.
struct RunResult {
  std::string progress;
  std::vector<float> params;
  double test_accuracy = 0;
  int64_t steps = 0;
};

// 410 samples in batches of 20: 21 steps an epoch, the last of 10 rows (run
// uncaptured), 5 epochs; Adam under a warmed-up cosine schedule, so the
// device computes a different learning rate and bias correction each step.
RunResult TrainOnFake(testing::FakeDevice& device, const std::string& cuda_graph,
                      const std::string& optimizer) {
  data::Dataset train = Quadrants(410, 1), test = Quadrants(100, 2);
  std::unique_ptr<nn::Model> model =
      *nn::BuildModelFromSpec(kSpec, "test", Shape{6, 6, 1}, &device);
  const optim::LrSchedule schedule = *optim::LrSchedule::Create(
      {.kind = "cosine", .base_lr = 0.05f, .warmup_steps = 10, .total_steps = 105});
  exchange::LocalExchange local(
      *optim::MakeOptimizer({.kind = optimizer}, static_cast<size_t>(model->num_params()), &device),
      schedule);
  std::ostringstream out;
  ProgressReporter progress(out);
  FakeClock clock;
  Trainer t(
      *model, local, train, &test,
      {.epochs = 5, .batch_size = 20, .seed = 3, .log_every_steps = 10, .cuda_graph = cuda_graph},
      progress, clock);
  absl::StatusOr<TrainResult> r = t.Run();
  EXPECT_TRUE(r.ok()) << r.status();
  RunResult run;
  run.progress = out.str();
  if (!r.ok()) return run;
  run.test_accuracy = r->test.accuracy;
  run.steps = r->steps;
  run.params.resize(static_cast<size_t>(model->num_params()));
  EXPECT_TRUE(
      device
          .CopyToHost(model->params().data(), run.params.data(), run.params.size() * sizeof(float))
          .ok());
  return run;
}

// The step captured once and replayed (FakeDevice records and replays its
// operations as a CUDA stream does) ends bit for bit where the same steps
// launched one by one end, and where the steps end whose scalars the host
// computes (a device that cannot capture): the device's learning rate,
// Adam's coefficients, the batch's place and dropout's call number follow
// the host's, step after step, over 105 steps.
TEST(DeviceTraining, ACapturedStepEqualsTheUncapturedOneOver100Steps) {
  for (const std::string optimizer : {"sgd", "adam"}) {
    SCOPED_TRACE(optimizer);
    testing::FakeDevice captured, launched, host_scalars;
    host_scalars.set_can_capture(false);
    const RunResult a = TrainOnFake(captured, "on", optimizer);
    const RunResult b = TrainOnFake(launched, "off", optimizer);
    const RunResult c = TrainOnFake(host_scalars, "auto", optimizer);
    ASSERT_EQ(a.steps, 105);
    EXPECT_GT(captured.replays(), 80) << "the full batches after the capture are replays";
    EXPECT_EQ(launched.replays(), 0);
    EXPECT_NE(a.progress.find("captured step 3 as a CUDA graph"), std::string::npos) << a.progress;
    EXPECT_NE(c.progress.find("CUDA graphs: off (cuda:7 cannot capture"), std::string::npos);
    EXPECT_EQ(a.params, b.params) << "captured against launched";
    EXPECT_EQ(a.params, c.params) << "captured against host scalars";
    EXPECT_EQ(testing::LossCurveOf(a.progress), testing::LossCurveOf(c.progress));
    EXPECT_EQ(a.test_accuracy, c.test_accuracy);
    EXPECT_GT(a.test_accuracy, 0.5);
  }
}

// --cuda-graph on where a step cannot be captured is an error saying why;
// auto says why once and trains.
TEST(DeviceTraining, CudaGraphOnRefusesWhatCannotBeCaptured) {
  testing::FakeDevice device;
  device.set_can_capture(false);
  data::Dataset train = Quadrants(40, 1);
  std::unique_ptr<nn::Model> model =
      *nn::BuildModelFromSpec(kSpec, "test", Shape{6, 6, 1}, &device);
  exchange::LocalExchange local(
      *optim::MakeOptimizer({.kind = "sgd"}, static_cast<size_t>(model->num_params()), &device),
      *optim::LrSchedule::Create({.base_lr = 0.05f}));
  std::ostringstream out;
  ProgressReporter progress(out);
  FakeClock clock;
  Trainer t(*model, local, train, nullptr, {.epochs = 1, .batch_size = 20, .cuda_graph = "on"},
            progress, clock);
  absl::StatusOr<TrainResult> r = t.Run();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(r.status().message()).find("cuda:7 cannot capture"), std::string::npos)
      << r.status();
}

// 21 samples, batch 10, shard 1 of 2: each epoch's last step leaves this
// rank no sample (BatchSampler's empty batch). On a device with its own
// memory, with the step's scalars on the device (the local optimizer there)
// and through host staging, it still takes every step with a zero gradient
// and the parameters stay finite.
TEST(DeviceTraining, AnEmptyLastBatchStillTakesTheStep) {
  for (const Exchange how : {Exchange::kLocalOnDevice, Exchange::kStagedHost}) {
    testing::FakeDevice device;
    data::Dataset train = Quadrants(21, 1);
    std::unique_ptr<nn::Model> model =
        *nn::BuildModelFromSpec(kSpec, "test", Shape{6, 6, 1}, &device);
    const size_t n = static_cast<size_t>(model->num_params());
    const bool on_device = how == Exchange::kLocalOnDevice;
    exchange::LocalExchange local(
        *optim::MakeOptimizer({.kind = "sgd"}, n, on_device ? &device : nullptr),
        *optim::LrSchedule::Create({.base_lr = 0.05f}));
    std::unique_ptr<exchange::StagedExchange> staged;
    if (!on_device) staged = *exchange::StagedExchange::Create(local, device, model->num_params());
    std::ostringstream out;
    ProgressReporter progress(out);
    FakeClock clock;
    Trainer t(*model, on_device ? static_cast<exchange::Exchange&>(local) : *staged, train, nullptr,
              {.epochs = 2, .batch_size = 10, .seed = 3, .shard_index = 1, .num_shards = 2},
              progress, clock);
    absl::StatusOr<TrainResult> r = t.Run();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->steps, 4);
    std::vector<float> params(n);
    ASSERT_TRUE(device.CopyToHost(model->params().data(), params.data(), n * sizeof(float)).ok());
    for (float p : params) ASSERT_TRUE(std::isfinite(p));
  }
}

}  // namespace
}  // namespace kubetrain::train
