// Cost of the per-step metrics against a training step of the built-in mlp,
// measured in the same process. Run with:
//   build/bench/kubetrain_metrics_bench --benchmark_counters_tabular=true
//
// BM_MlpStep (registered first, so it runs first) times one mlp training
// step at batch 64 as bench/train_step_bench.cc does and records it.
// BM_StepMetrics times everything a worker adds to one step for metrics
// with one parameter server: the trainer's two extra clock reads and its
// RecordStep, PsExchange's two clock reads around push and pull and its two
// RecordExchange calls. It reports `fraction_of_mlp_step`; the goal is
// < 0.01. The metrics are registered as a worker's (no HTTP server runs).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "base/clock.h"
#include "runtime/metrics/runtime_metrics.h"
#include "runtime/nn/model.h"
#include "runtime/nn/model_spec.h"
#include "runtime/nn/softmax_cross_entropy.h"
#include "runtime/optim/optimizer.h"
#include "runtime/tensor/aligned_buffer.h"

namespace kubetrain {
namespace {

constexpr int64_t kBatch = 64;
constexpr int64_t kClasses = 10;
// Seconds per mlp step measured by BM_MlpStep; 0 until measured.
double g_mlp_step_seconds = 0;

void BM_MlpStep(benchmark::State& state) {
  absl::StatusOr<std::unique_ptr<nn::Model>> loaded = nn::LoadModel("mlp", Shape{28, 28, 1});
  if (!loaded.ok()) {
    state.SkipWithError(loaded.status().ToString().c_str());
    return;
  }
  nn::Model& model = **loaded;
  model.InitParams(42);
  optim::OptimizerOptions o;
  o.kind = "sgd";
  o.momentum = 0.9f;
  std::unique_ptr<optim::Optimizer> opt = *optim::MakeOptimizer(o, model.params().size());
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  AlignedBuffer features(static_cast<size_t>(kBatch * 784));
  for (int64_t i = 0; i < kBatch * 784; ++i) features.data()[i] = pixel(rng);
  std::vector<int32_t> labels(static_cast<size_t>(kBatch));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>(i % kClasses);
  AlignedBuffer grad_logits(static_cast<size_t>(kBatch * kClasses));
  TensorView grad(grad_logits.data(), {kBatch, kClasses});
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    TensorView logits = model.Forward(features.data(), kBatch, /*training=*/true);
    benchmark::DoNotOptimize(nn::SoftmaxCrossEntropy(logits, labels.data(), &grad).loss);
    model.Backward(grad);
    opt->Apply(model.params(), model.grads(), 0.01f);
    benchmark::ClobberMemory();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  g_mlp_step_seconds = seconds / static_cast<double>(state.iterations());
}

void BM_StepMetrics(benchmark::State& state) {
  metrics::RuntimeMetrics m({.constant_labels = {{"job", "bench"},
                                                 {"namespace", "default"},
                                                 {"replica_type", "worker"},
                                                 {"replica_index", "0"}},
                             .training = true,
                             .evaluates = true,
                             .ps_client = true,
                             .ps_server = false,
                             .start_time_unix_seconds = 0});
  RealClock clock;
  int64_t step = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    // Trainer: step start and end of compute (the step's end was read
    // before metrics existed).
    const double a = clock.NowSeconds();
    const double b = clock.NowSeconds();
    // PsExchange, one shard: push and pull, each timed.
    const double p0 = clock.NowSeconds();
    m.RecordExchange(metrics::ExchangeOp::kPush, metrics::PeerRole::kPs, clock.NowSeconds() - p0,
                     940584, 0);
    const double p1 = clock.NowSeconds();
    m.RecordExchange(metrics::ExchangeOp::kPull, metrics::PeerRole::kPs, clock.NowSeconds() - p1, 0,
                     940584);
    m.RecordStep({.step_seconds = b - a + 0.0005,
                  .compute_seconds = b - a,
                  .exchange_seconds = 0.0005,
                  .samples = kBatch,
                  .global_step = ++step});
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double per_step = seconds / static_cast<double>(state.iterations());
  state.counters["ns_per_step"] = per_step * 1e9;
  if (g_mlp_step_seconds > 0) {
    state.counters["mlp_step_us"] = g_mlp_step_seconds * 1e6;
    state.counters["fraction_of_mlp_step"] = per_step / g_mlp_step_seconds;
  }
}

BENCHMARK(BM_MlpStep)->Unit(benchmark::kMicrosecond)->MinTime(2.0)->UseRealTime();
BENCHMARK(BM_StepMetrics)->Unit(benchmark::kNanosecond)->MinTime(1.0)->UseRealTime();

}  // namespace
}  // namespace kubetrain

BENCHMARK_MAIN();
