#include "runtime/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <span>
#include <sstream>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/exchange/local_exchange.h"
#include "runtime/metrics/metrics_server.h"
#include "runtime/metrics/runtime_metrics.h"
#include "runtime/nn/model_spec.h"
#include "tests/support/quadrants_dataset.h"

namespace kubetrain::train {
namespace {

using ::testing::HasSubstr;

// 4 classes in 8 features: class c has feature 2c and 2c+1 set, plus noise.
data::Dataset Synthetic(int n, uint64_t seed) {
  data::Dataset ds;
  ds.sample_shape = {8};
  ds.num_classes = 4;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise(0, 0.3f);
  for (int i = 0; i < n; ++i) {
    const int c = i % 4;
    for (int f = 0; f < 8; ++f) ds.features.push_back((f / 2 == c ? 1.0f : 0.0f) + noise(rng));
    ds.labels.push_back(c);
  }
  return ds;
}

std::unique_ptr<nn::Model> SmallModel() {
  return *nn::BuildModelFromSpec(
      "layers: [{type: dense, units: 16}, relu, {type: dense, units: 4}]", "test", Shape{8});
}

// Records each call; applies plain SGD so training still progresses.
class RecordingExchange : public exchange::Exchange {
 public:
  explicit RecordingExchange(int64_t start) : start_(start) {}
  std::string name() const override { return "recording"; }
  absl::StatusOr<int64_t> Start(std::span<float> params) override { return start_; }
  absl::StatusOr<int64_t> Step(int64_t step, std::span<const float> grads,
                               std::span<float> params) override {
    steps.push_back(step);
    for (size_t i = 0; i < params.size(); ++i) params[i] -= 0.1f * grads[i];
    return step + 1;
  }
  absl::Status Finish() override {
    finished = true;
    return absl::OkStatus();
  }
  std::vector<int64_t> steps;
  bool finished = false;

 private:
  int64_t start_;
};

TEST(Trainer, LearnsASeparableProblemAndReports) {
  data::Dataset train = Synthetic(400, 1), test = Synthetic(100, 2);
  auto model = SmallModel();
  auto exchange =
      exchange::LocalExchange(*optim::MakeOptimizer({.kind = "sgd"}, model->num_params()),
                              *optim::LrSchedule::Create({.base_lr = 0.05f}));
  std::ostringstream out;
  ProgressReporter progress(out);
  FakeClock clock;
  Trainer t(*model, exchange, train, &test,
            {.epochs = 5, .batch_size = 20, .seed = 3, .log_every_steps = 10}, progress, clock);
  absl::StatusOr<TrainResult> r = t.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 100);
  EXPECT_GE(r->test.accuracy, 0.95);
  EXPECT_EQ(r->test.samples, 100);
  EXPECT_THAT(out.str(), HasSubstr("progress step=10/100 epoch=1/5"));
  EXPECT_THAT(out.str(), HasSubstr("epoch epoch=5/5 step=100"));
}

TEST(Trainer, SameSeedGivesIdenticalParameters) {
  data::Dataset train = Synthetic(200, 1);
  std::vector<std::vector<float>> finals;
  for (int run = 0; run < 2; ++run) {
    auto model = SmallModel();
    RecordingExchange ex(0);
    std::ostringstream out;
    ProgressReporter progress(out);
    FakeClock clock;
    Trainer t(*model, ex, train, nullptr, {.epochs = 2, .batch_size = 16, .seed = 9}, progress,
              clock);
    ASSERT_TRUE(t.Run().ok());
    finals.emplace_back(model->params().begin(), model->params().end());
  }
  EXPECT_EQ(finals[0], finals[1]);
}

TEST(Trainer, ContinuesFromTheStepTheExchangeReturns) {
  data::Dataset train = Synthetic(100, 1);
  auto model = SmallModel();
  RecordingExchange ex(/*start=*/7);
  std::ostringstream out;
  ProgressReporter progress(out);
  FakeClock clock;
  // 100 samples / batch 10 = 10 steps per epoch, 3 epochs = 30 steps.
  Trainer t(*model, ex, train, nullptr, {.epochs = 3, .batch_size = 10}, progress, clock);
  ASSERT_TRUE(t.Run().ok());
  ASSERT_EQ(ex.steps.size(), 23u);
  EXPECT_EQ(ex.steps.front(), 7);
  EXPECT_EQ(ex.steps.back(), 29);
  EXPECT_TRUE(ex.finished);
}

// A lost peer ends training with what this replica was doing in front of
// whom the exchange lost, and the exchange's status code (the exit code
// comes from it, never from the text).
class LosingExchange : public RecordingExchange {
 public:
  LosingExchange() : RecordingExchange(0) {}
  absl::StatusOr<int64_t> Step(int64_t step, std::span<const float> grads,
                               std::span<float> params) override {
    if (step == 6) {
      return absl::AbortedError("lost worker-1 (rank 1, 10.0.0.5:2222): no heartbeat for 31s");
    }
    return RecordingExchange::Step(step, grads, params);
  }
};

TEST(Trainer, ALostPeerSaysWhatThisReplicaWasDoing) {
  data::Dataset train = Synthetic(400, 1);
  auto model = SmallModel();
  LosingExchange exchange;
  std::ostringstream out;
  ProgressReporter progress(out);
  FakeClock clock;
  Trainer t(*model, exchange, train, nullptr, {.epochs = 2, .batch_size = 100, .seed = 3}, progress,
            clock);
  absl::StatusOr<TrainResult> r = t.Run();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsAborted(r.status())) << r.status();
  EXPECT_EQ(r.status().message(),
            "at step 7 of 8 (epoch 2), in the recording exchange: lost worker-1 (rank 1, "
            "10.0.0.5:2222): no heartbeat for 31s");
}

// A signal watcher's stop request, arriving while step `at` runs (here
// from inside the exchange, deterministically): the step completes or, with
// `fail_step`, fails as a left world makes it; either way training stops at
// the boundary and checkpoints the parameters of the last completed step.
class StoppingExchange : public RecordingExchange {
 public:
  StoppingExchange(StopRequest& stop, int64_t at, bool fail_step)
      : RecordingExchange(0), stop_(stop), at_(at), fail_step_(fail_step) {}
  absl::StatusOr<int64_t> Step(int64_t step, std::span<const float> grads,
                               std::span<float> params) override {
    if (step == at_) {
      accepted = stop_.Request("SIGTERM");
      if (fail_step_) return absl::AbortedError("worker-1 left: stopped by signal 15");
    }
    absl::StatusOr<int64_t> next = RecordingExchange::Step(step, grads, params);
    after_last_step.assign(params.begin(), params.end());
    return next;
  }
  absl::StatusOr<std::string> CheckpointNow(int64_t step, std::span<const float> params) override {
    checkpoint_step = step;
    checkpoint_params.assign(params.begin(), params.end());
    if (!write_error.ok()) return write_error;
    return std::string("/ckpt/ckpt-") + std::to_string(step);
  }
  bool accepted = false;
  std::vector<float> after_last_step;
  int64_t checkpoint_step = -1;
  std::vector<float> checkpoint_params;
  absl::Status write_error;

 private:
  StopRequest& stop_;
  const int64_t at_;
  const bool fail_step_;
};

TEST(Trainer, AStopRequestEndsTrainingAtTheNextBoundaryWithACheckpoint) {
  for (const bool fail_step : {false, true}) {
    SCOPED_TRACE(fail_step ? "the step in flight fails" : "the step in flight completes");
    data::Dataset train = Synthetic(400, 1);
    auto model = SmallModel();
    StopRequest stop;
    StoppingExchange exchange(stop, /*at=*/4, fail_step);
    std::ostringstream out;
    ProgressReporter progress(out);
    FakeClock clock;
    Trainer t(*model, exchange, train, nullptr,
              {.epochs = 2, .batch_size = 50, .seed = 3, .stop = &stop}, progress, clock);
    absl::StatusOr<TrainResult> r = t.Run();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(exchange.accepted) << "the loop did not take charge of the stop";
    EXPECT_FALSE(stop.Request("SIGTERM")) << "the loop has ended: nobody stops any more";
    // Completed: steps 0-4, stopped before 5; failed: 0-3 completed.
    const int64_t expected = fail_step ? 4 : 5;
    ASSERT_TRUE(r->stopped.has_value());
    EXPECT_EQ(r->stopped->step, expected);
    EXPECT_EQ(r->stopped->checkpoint_path, "/ckpt/ckpt-" + std::to_string(expected));
    EXPECT_EQ(r->stopped->cause, "SIGTERM");
    EXPECT_EQ(r->steps, expected);
    EXPECT_EQ(exchange.checkpoint_step, expected);
    EXPECT_EQ(exchange.checkpoint_params, exchange.after_last_step);
    EXPECT_EQ(exchange.steps.back(), expected - 1);
    EXPECT_FALSE(exchange.finished) << "a stopped replica must not finish the job";
    EXPECT_THAT(out.str(),
                HasSubstr("checkpoint at step " + std::to_string(expected) +
                          " written in 0.00 s (SIGTERM): /ckpt/ckpt-" + std::to_string(expected)));
  }
}

TEST(Trainer, AStoppedReplicaThatWritesNoCheckpointSaysSo) {
  data::Dataset train = Synthetic(400, 1);
  auto model = SmallModel();
  StopRequest stop;
  class NoCheckpoint : public StoppingExchange {
   public:
    using StoppingExchange::StoppingExchange;
    absl::StatusOr<std::string> CheckpointNow(int64_t, std::span<const float>) override {
      return std::string();
    }
  } exchange(stop, /*at=*/2, /*fail_step=*/true);
  std::ostringstream out;
  ProgressReporter progress(out);
  FakeClock clock;
  Trainer t(*model, exchange, train, nullptr, {.epochs = 1, .batch_size = 50, .stop = &stop},
            progress, clock);
  absl::StatusOr<TrainResult> r = t.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->stopped.has_value());
  EXPECT_EQ(r->stopped->step, 2);
  EXPECT_EQ(r->stopped->checkpoint_path, "");
  EXPECT_THAT(out.str(),
              HasSubstr("stopped at step 2 (SIGTERM); this replica writes no checkpoint"));
}

// The checkpoint that was asked for and could not be written is an error
// with the write's code (the caller exits retryably: state was not saved).
TEST(Trainer, AFailedStopCheckpointIsAnError) {
  data::Dataset train = Synthetic(400, 1);
  auto model = SmallModel();
  StopRequest stop;
  StoppingExchange exchange(stop, /*at=*/1, /*fail_step=*/false);
  exchange.write_error = absl::ResourceExhaustedError("disk full");
  std::ostringstream out;
  ProgressReporter progress(out);
  FakeClock clock;
  Trainer t(*model, exchange, train, nullptr, {.epochs = 1, .batch_size = 50, .stop = &stop},
            progress, clock);
  absl::StatusOr<TrainResult> r = t.Run();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(r.status())) << r.status();
  EXPECT_EQ(r.status().message(), "checkpoint at step 2 (SIGTERM) not written: disk full");
}

// Before the loop begins and after it ends nobody honours a request: the
// signal watcher ends the process itself.
TEST(StopRequest, IsHonouredOnlyWhileTrainingRuns) {
  StopRequest stop;
  EXPECT_FALSE(stop.requested());
  EXPECT_FALSE(stop.Request("SIGINT"));
  EXPECT_TRUE(stop.requested());
  stop.BeginTraining();
  EXPECT_TRUE(stop.Request("SIGTERM"));
  EXPECT_EQ(stop.cause(), "SIGINT") << "the first request's cause is kept";
  stop.EndTraining();
  EXPECT_FALSE(stop.Request("SIGTERM"));
}

TEST(Trainer, ShardsSeeDisjointHalves) {
  data::Dataset train = Synthetic(100, 1);
  for (int shard = 0; shard < 2; ++shard) {
    auto model = SmallModel();
    RecordingExchange ex(0);
    std::ostringstream out;
    ProgressReporter progress(out);
    FakeClock clock;
    Trainer t(*model, ex, train, nullptr,
              {.epochs = 1, .batch_size = 10, .shard_index = shard, .num_shards = 2}, progress,
              clock);
    ASSERT_TRUE(t.Run().ok());
    EXPECT_EQ(ex.steps.size(), 5u) << "50 samples per shard, batch 10";
  }
}

// 21 samples, batch 10, 2 shards: the world's second step has one position
// left, so shard 1's last batch of each epoch is empty (BatchSampler). It
// still takes the step, with a zero gradient, and both shards take the same
// number of steps. For a dense model and for conv, pooling and dropout.
TEST(Trainer, AnEmptyLastBatchStillStepsWithAZeroGradient) {
  class GradientExchange : public RecordingExchange {
   public:
    GradientExchange() : RecordingExchange(0) {}
    absl::StatusOr<int64_t> Step(int64_t step, std::span<const float> grads,
                                 std::span<float> params) override {
      float largest = 0;
      bool finite = true;
      for (float g : grads) {
        largest = std::max(largest, std::abs(g));
        finite = finite && std::isfinite(g);
      }
      largest_grad.push_back(finite ? largest : -1.0f);
      return RecordingExchange::Step(step, grads, params);
    }
    std::vector<float> largest_grad;
  };
  struct Case {
    data::Dataset train;
    std::function<std::unique_ptr<nn::Model>()> model;
  };
  const Case cases[] = {
      {Synthetic(21, 1), SmallModel},
      {testing::QuadrantsDataset(21, 1, /*side=*/6, /*channels=*/1), [] {
         return *nn::BuildModelFromSpec(
             "layers: [{type: conv2d, filters: 4, kernel: 3, padding: same}, relu, "
             "{type: maxpool2d, size: 2}, flatten, {type: dropout, rate: 0.1}, "
             "{type: dense, units: 4}]",
             "test", Shape{6, 6, 1});
       }}};
  for (const Case& c : cases) {
    for (int shard = 0; shard < 2; ++shard) {
      auto model = c.model();
      GradientExchange ex;
      std::ostringstream out;
      ProgressReporter progress(out);
      FakeClock clock;
      Trainer t(*model, ex, c.train, nullptr,
                {.epochs = 2, .batch_size = 10, .shard_index = shard, .num_shards = 2}, progress,
                clock);
      absl::StatusOr<TrainResult> r = t.Run();
      ASSERT_TRUE(r.ok()) << "shard " << shard << ": " << r.status();
      ASSERT_EQ(ex.steps.size(), 4u) << "shard " << shard;
      for (size_t i = 0; i < ex.largest_grad.size(); ++i) {
        if (shard == 1 && i % 2 == 1) {
          EXPECT_EQ(ex.largest_grad[i], 0.0f) << "step " << i;
        } else {
          EXPECT_GT(ex.largest_grad[i], 0.0f) << "shard " << shard << " step " << i;
        }
      }
    }
  }
}

TEST(Trainer, RefusesDataThatDoesNotFitTheModel) {
  data::Dataset train = Synthetic(40, 1);
  train.labels[3] = 7;  // the model has 4 outputs
  auto model = SmallModel();
  RecordingExchange ex(0);
  std::ostringstream out;
  ProgressReporter progress(out);
  FakeClock clock;
  Trainer t(*model, ex, train, nullptr, {.epochs = 1, .batch_size = 10}, progress, clock);
  absl::StatusOr<TrainResult> r = t.Run();
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("training labels span [0, 7] but the model has 4 outputs"));
}

TEST(ProgressReporter, LinesAreStableKeyValue) {
  EXPECT_EQ(
      FormatProgress({.step = 5,
                      .total_steps = 50,
                      .epoch = 1,
                      .total_epochs = 2,
                      .loss = 0.5,
                      .accuracy = 0.75,
                      .lr = 0.1,
                      .samples_per_second = 1234.4,
                      .exchange_share = 0.234,
                      .eta_seconds = 83}),
      "progress step=5/50 epoch=1/2 loss=0.5000 acc=0.7500 lr=0.1 samples/s=1234 exchange=0.23 "
      "eta=1m23s");
  EXPECT_EQ(FormatFinal({.test_accuracy = 0.8912,
                         .test_loss = 0.31,
                         .steps = 10,
                         .epochs = 1,
                         .seconds = 2.5,
                         .samples_per_second = 100}),
            "final test_accuracy=0.8912 test_loss=0.3100 steps=10 epochs=1 time=2.5s samples/s=100 "
            "exchange=0.00");
  EXPECT_EQ(FormatDuration(3723), "1h02m03s");
  EXPECT_EQ(FormatDuration(7), "7s");
}

TEST(ProgressReporter, JsonLinesHaveTheSameKeysPlusMsg) {
  EXPECT_EQ(FormatProgress({.step = 5,
                            .total_steps = 50,
                            .epoch = 1,
                            .total_epochs = 2,
                            .loss = 0.5,
                            .accuracy = 0.75,
                            .lr = 0.1,
                            .samples_per_second = 1234.4,
                            .exchange_share = 0.25,
                            .eta_seconds = 83},
                           LogFormat::kJson),
            "{\"msg\":\"progress step=5/50 epoch=1/2 loss=0.5000 acc=0.7500 lr=0.1 samples/s=1234 "
            "exchange=0.25 eta=1m23s\",\"kind\":\"progress\",\"step\":5,\"total_steps\":50,"
            "\"epoch\":1,\"total_epochs\":2,\"loss\":0.5,\"acc\":0.75,\"lr\":0.1,"
            "\"samples/s\":1234,\"exchange\":0.25,\"eta\":83}");
  EXPECT_EQ(FormatEpoch({.epoch = 2,
                         .total_epochs = 2,
                         .step = 10,
                         .train_loss = 0.25,
                         .train_accuracy = 0.5,
                         .test_loss = std::nullopt,
                         .test_accuracy = 0.875,
                         .exchange_share = 0.5,
                         .seconds = 1.5},
                        LogFormat::kJson),
            "{\"msg\":\"epoch epoch=2/2 step=10 train_loss=0.2500 train_acc=0.5000 test_acc=0.8750 "
            "exchange=0.50 time=1.5s\",\"kind\":\"epoch\",\"epoch\":2,\"total_epochs\":2,"
            "\"step\":10,\"train_loss\":0.25,\"train_acc\":0.5,\"test_acc\":0.875,"
            "\"exchange\":0.5,\"time\":1.5}");
  EXPECT_EQ(FormatInfo("say \"hi\"\n", LogFormat::kJson),
            "{\"msg\":\"info say \\\"hi\\\"\\n\",\"kind\":\"info\"}");
  EXPECT_TRUE(ParseLogFormat("json").ok());
  EXPECT_FALSE(ParseLogFormat("yaml").ok());
}

// The value of the first series in Prometheus text `text` whose line
// starts with `series` followed by a space; NaN when absent.
double SeriesValue(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return std::nan("");
}

// Plain SGD whose every step takes `seconds` of (fake) time.
class TimedExchange : public RecordingExchange {
 public:
  TimedExchange(FakeClock& clock, double seconds)
      : RecordingExchange(0), clock_(clock), seconds_(seconds) {}
  absl::StatusOr<int64_t> Step(int64_t step, std::span<const float> grads,
                               std::span<float> params) override {
    clock_.AdvanceSeconds(seconds_);
    return RecordingExchange::Step(step, grads, params);
  }

 private:
  FakeClock& clock_;
  double seconds_;
};

TEST(Trainer, RecordsStepMetricsAndTheExchangeShare) {
  data::Dataset train = Synthetic(200, 1), test = Synthetic(40, 2);
  auto model = SmallModel();
  FakeClock clock;
  TimedExchange ex(clock, 0.004);
  metrics::RuntimeMetrics m({.constant_labels = {}, .training = true, .evaluates = true});
  std::ostringstream out;
  ProgressReporter progress(out);
  Trainer t(*model, ex, train, &test,
            {.epochs = 2, .batch_size = 20, .log_every_steps = 5, .metrics = &m}, progress, clock);
  absl::StatusOr<TrainResult> r = t.Run();
  ASSERT_TRUE(r.ok()) << r.status();
  // The fake clock moves only in the exchange: all step time is exchange.
  EXPECT_THAT(out.str(), HasSubstr("exchange=1.00 eta="));
  EXPECT_DOUBLE_EQ(r->exchange_share, 1.0);
  const std::string text = metrics::SerializeMetrics(*m.registry());
  EXPECT_EQ(SeriesValue(text, "kubetrain_steps_total"), 20);
  EXPECT_EQ(SeriesValue(text, "kubetrain_samples_total"), 400);
  EXPECT_EQ(SeriesValue(text, "kubetrain_global_step"), 20);
  EXPECT_EQ(SeriesValue(text, "kubetrain_total_steps"), 20);
  EXPECT_EQ(SeriesValue(text, "kubetrain_step_duration_seconds_count"), 20);
  EXPECT_NEAR(SeriesValue(text, "kubetrain_step_duration_seconds_sum"), 0.08, 1e-9);
  EXPECT_NEAR(SeriesValue(text, "kubetrain_step_phase_duration_seconds_sum{phase=\"exchange\"}"),
              0.08, 1e-9);
  EXPECT_NEAR(SeriesValue(text, "kubetrain_step_phase_duration_seconds_sum{phase=\"compute\"}"), 0,
              1e-9);
  // Window gauges: 4 ms steps fill a 1 s window only at the end of the run.
  EXPECT_GT(SeriesValue(text, "kubetrain_train_accuracy_ratio"), 0.5);
  EXPECT_NEAR(SeriesValue(text, "kubetrain_samples_per_second"), 20 / 0.004, 1e-6);
  EXPECT_NEAR(SeriesValue(text, "kubetrain_eval_accuracy_ratio"), r->test.accuracy, 1e-12);
}

}  // namespace
}  // namespace kubetrain::train
