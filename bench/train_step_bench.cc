// Training-step throughput as a fraction of sgemm peak, measured in the
// same process. Run with:
//   build/bench/kubetrain_bench --benchmark_counters_tabular=true
//
// BM_SgemmPeak is registered (and so runs) first and records the best
// FLOP/s it saw; BM_TrainStep reports `peak_fraction` against that figure.
// If the sgemm benchmarks were filtered out, the peak is measured once,
// inline, before the first training step. `cpu_fraction` is the same ratio
// over the process's CPU time instead of wall time (less moved by other
// processes on a shared machine; spinning pool threads count against it).
#include <benchmark/benchmark.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/nn/model.h"
#include "runtime/nn/model_spec.h"
#include "runtime/nn/softmax_cross_entropy.h"
#include "runtime/optim/optimizer.h"
#include "runtime/tensor/aligned_buffer.h"
#include "runtime/tensor/blas.h"
#include "runtime/tensor/tensor_view.h"

namespace kubetrain {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kSeed = 42;
constexpr int64_t kClasses = 10;
// Only timed runs at least this long count towards the recorded peak, so a
// one-iteration warm-up run cannot set it.
constexpr double kMinPeakRunSeconds = 0.1;

// Best square-sgemm FLOP/s measured in this process; 0 until measured.
double g_sgemm_peak_flops = 0;
// The same per second of the process's CPU time (all its threads): the
// companion figure for machines shared with other work, where wall time
// mostly measures how much of the CPUs the bench got.
double g_sgemm_peak_cpu_flops = 0;

double ProcessCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

std::vector<float> RandomMatrix(int64_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> m(static_cast<size_t>(n * n));
  for (float& x : m) x = dist(rng);
  return m;
}

double SgemmFlops(int64_t n) { return 2.0 * static_cast<double>(n) * n * n; }

void SquareSgemm(int64_t n, const float* a, const float* b, float* c) {
  Gemm(Trans::kNo, Trans::kNo, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
}

// C = A * B for square n x n matrices through kubetrain::Gemm (cblas_sgemm).
void BM_SgemmPeak(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::mt19937_64 rng(kSeed);
  const std::vector<float> a = RandomMatrix(n, rng);
  const std::vector<float> b = RandomMatrix(n, rng);
  std::vector<float> c(a.size());
  SquareSgemm(n, a.data(), b.data(), c.data());  // warm-up: threads, pages

  const auto t0 = Clock::now();
  const double cpu0 = ProcessCpuSeconds();
  for (auto _ : state) {
    SquareSgemm(n, a.data(), b.data(), c.data());
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu_seconds = ProcessCpuSeconds() - cpu0;
  const double flops = SgemmFlops(n) * static_cast<double>(state.iterations());
  if (seconds >= kMinPeakRunSeconds) {
    g_sgemm_peak_flops = std::max(g_sgemm_peak_flops, flops / seconds);
    g_sgemm_peak_cpu_flops = std::max(g_sgemm_peak_cpu_flops, flops / cpu_seconds);
  }
  state.counters["FLOPS"] = benchmark::Counter(flops, benchmark::Counter::kIsRate);
}

// Measures the sgemm peak without the framework, for runs that filtered out
// BM_SgemmPeak.
void MeasureSgemmPeakInline() {
  for (int64_t n : {512, 1024, 2048}) {
    std::mt19937_64 rng(kSeed);
    const std::vector<float> a = RandomMatrix(n, rng);
    const std::vector<float> b = RandomMatrix(n, rng);
    std::vector<float> c(a.size());
    SquareSgemm(n, a.data(), b.data(), c.data());
    int64_t iters = 0;
    const auto t0 = Clock::now();
    const double cpu0 = ProcessCpuSeconds();
    double seconds = 0;
    do {
      SquareSgemm(n, a.data(), b.data(), c.data());
      ++iters;
      seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (seconds < 0.5);
    const double flops = SgemmFlops(n) * static_cast<double>(iters);
    g_sgemm_peak_flops = std::max(g_sgemm_peak_flops, flops / seconds);
    g_sgemm_peak_cpu_flops = std::max(g_sgemm_peak_cpu_flops, flops / (ProcessCpuSeconds() - cpu0));
  }
}

// One training step on random Fashion-MNIST-shaped data: forward (training
// mode), softmax cross-entropy with gradient, backward, SGD-momentum update.
void BM_TrainStep(benchmark::State& state, const std::string& model_name) {
  const int64_t batch = state.range(0);
  if (g_sgemm_peak_flops <= 0) MeasureSgemmPeakInline();

  absl::StatusOr<std::unique_ptr<nn::Model>> loaded = nn::LoadModel(model_name, Shape{28, 28, 1});
  if (!loaded.ok()) {
    state.SkipWithError(loaded.status().ToString().c_str());
    return;
  }
  nn::Model& model = **loaded;
  model.InitParams(kSeed);

  optim::OptimizerOptions opt_options;
  opt_options.kind = "sgd";
  opt_options.momentum = 0.9f;
  absl::StatusOr<std::unique_ptr<optim::Optimizer>> optimizer =
      optim::MakeOptimizer(opt_options, model.params().size(), &model.device());
  if (!optimizer.ok()) {
    state.SkipWithError(optimizer.status().ToString().c_str());
    return;
  }

  const int64_t sample_size = 28 * 28;
  std::mt19937_64 rng(kSeed);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  std::uniform_int_distribution<int32_t> label(0, kClasses - 1);
  AlignedBuffer features(static_cast<size_t>(batch * sample_size));
  for (int64_t i = 0; i < batch * sample_size; ++i) features.data()[i] = pixel(rng);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  for (int32_t& l : labels) l = label(rng);
  AlignedBuffer grad_logits(static_cast<size_t>(batch * kClasses));
  TensorView grad(grad_logits.data(), {batch, kClasses});

  double loss = 0;
  const auto t0 = Clock::now();
  const double cpu0 = ProcessCpuSeconds();
  for (auto _ : state) {
    TensorView logits = model.Forward(features.data(), batch, /*training=*/true);
    loss = nn::SoftmaxCrossEntropy(logits, labels.data(), &grad).loss;
    model.Backward(grad);
    (*optimizer)->Apply(model.params(), model.grads(), /*lr=*/0.01f);
    benchmark::ClobberMemory();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu_seconds = ProcessCpuSeconds() - cpu0;
  if (!std::isfinite(loss)) {
    state.SkipWithError("loss is not finite");
    return;
  }

  const double step_flops = static_cast<double>(model.TrainFlops(batch));
  const double iters = static_cast<double>(state.iterations());
  state.counters["FLOPS"] = benchmark::Counter(step_flops * iters, benchmark::Counter::kIsRate);
  state.counters["samples/s"] =
      benchmark::Counter(static_cast<double>(batch) * iters, benchmark::Counter::kIsRate);
  // Wall-clock rate over the same loop, the way BM_SgemmPeak measures the
  // peak, so the two are comparable.
  state.counters["peak_fraction"] = step_flops * iters / seconds / g_sgemm_peak_flops;
  state.counters["sgemm_peak"] = g_sgemm_peak_flops;
  // The same ratio over CPU time: FLOPs per CPU-second of the step against
  // those of the sgemm peak. Idle waits do not count, spinning does.
  state.counters["cpu_fraction"] = step_flops * iters / cpu_seconds / g_sgemm_peak_cpu_flops;
}

// Registered first so it runs first.
BENCHMARK(BM_SgemmPeak)
    ->Arg(512)
    ->Arg(1024)
    ->Arg(2048)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0)
    ->UseRealTime();

BENCHMARK_CAPTURE(BM_TrainStep, mlp, std::string("mlp"))
    ->Arg(64)
    ->Arg(256)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_TrainStep, cnn, std::string("cnn"))
    ->Arg(64)
    ->Arg(256)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

}  // namespace
}  // namespace kubetrain

int main(int argc, char** argv) {
  kubetrain::SetBlasThreads(0);  // all CPUs this process may use
  benchmark::AddCustomContext("blas_threads", std::to_string(kubetrain::BlasThreads()));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
