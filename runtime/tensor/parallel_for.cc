#include "runtime/tensor/parallel_for.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/tensor/denormals.h"

namespace kubetrain {
namespace {

// Chunks per pool thread at most: threads take chunks as they free up, so
// a thread that the OS runs less often (another process on its CPU) takes
// fewer of them instead of holding up the region.
constexpr int kChunksPerThread = 4;

// True on pool workers and on a caller while it runs a region.
thread_local bool t_in_region = false;

class Pool {
 public:
  ~Pool() { Resize(0); }

  int threads() {
    std::lock_guard<std::mutex> l(config_mu_);
    if (threads_ == 0) threads_ = std::max(1, openblas_get_num_threads());
    return threads_;
  }

  void SetThreads(int n) {
    std::lock_guard<std::mutex> run(run_mu_);
    std::lock_guard<std::mutex> l(config_mu_);
    threads_ = std::max(1, n);
    Resize(threads_ - 1);
  }

  void Run(int chunks, absl::FunctionRef<void(int)> task) {
    if (chunks <= 1 || t_in_region || !run_mu_.try_lock()) {
      RunInline(chunks, task);
      return;
    }
    std::lock_guard<std::mutex> run(run_mu_, std::adopt_lock);
    {
      std::lock_guard<std::mutex> l(config_mu_);
      if (threads_ == 0) threads_ = std::max(1, openblas_get_num_threads());
      Resize(threads_ - 1);
    }
    if (workers_.empty()) {  // one thread: no hand-over, OpenBLAS untouched
      RunInline(chunks, task);
      return;
    }
    const int blas = openblas_get_num_threads();
    if (blas != 1) openblas_set_num_threads(1);
    {
      std::lock_guard<std::mutex> l(mu_);
      task_ = &task;
      chunks_ = chunks;
      next_.store(0, std::memory_order_relaxed);
      busy_workers_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
    }
    work_cv_.notify_all();
    t_in_region = true;
    Drain(task, chunks);
    t_in_region = false;
    {
      // Every worker checks in, so none can take a chunk of the next region
      // with this region's task.
      SpinUntil([&] { return busy_workers_.load(std::memory_order_acquire) == 0; });
      std::unique_lock<std::mutex> l(mu_);
      done_cv_.wait(l, [&] { return busy_workers_.load(std::memory_order_relaxed) == 0; });
      task_ = nullptr;
    }
    if (blas != 1) openblas_set_num_threads(blas);
  }

 private:
  static void RunInline(int chunks, absl::FunctionRef<void(int)> task) {
    const bool outer = t_in_region;
    t_in_region = true;
    for (int c = 0; c < chunks; ++c) task(c);
    t_in_region = outer;
  }

  // Runs chunks of the current region until none are left.
  void Drain(absl::FunctionRef<void(int)> task, int chunks) {
    for (int c; (c = next_.fetch_add(1, std::memory_order_relaxed)) < chunks;) task(c);
  }

  // Spins up to kSpin for done() before the caller blocks: the regions of a
  // training step come back to back, and a futex wake-up costs tens of
  // microseconds, which is a large part of a small GEMM.
  template <typename Done>
  static void SpinUntil(Done done) {
    constexpr auto kSpin = std::chrono::microseconds(50);
    const auto until = std::chrono::steady_clock::now() + kSpin;
    while (!done()) {
      for (int i = 0; i < 64; ++i) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
      }
      if (std::chrono::steady_clock::now() >= until) return;
    }
  }

  void Worker(uint64_t seen) {
    FlushDenormalsInThisThread();
    t_in_region = true;
    for (;;) {
      const absl::FunctionRef<void(int)>* task;
      int chunks;
      SpinUntil([&] { return generation_.load(std::memory_order_acquire) != seen; });
      {
        std::unique_lock<std::mutex> l(mu_);
        work_cv_.wait(l, [&] { return stop_ || generation_.load() != seen; });
        if (stop_) return;
        seen = generation_.load();
        task = task_;
        chunks = chunks_;
      }
      Drain(*task, chunks);
      std::lock_guard<std::mutex> l(mu_);
      if (busy_workers_.fetch_sub(1, std::memory_order_acq_rel) == 1) done_cv_.notify_all();
    }
  }

  // Holds config_mu_ (or is the destructor); no region is running.
  void Resize(int workers) {
    if (static_cast<int>(workers_.size()) == workers) return;
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
    stop_ = false;
    for (int i = 0; i < workers; ++i) {
      workers_.emplace_back([this, g = generation_.load()] { Worker(g); });
    }
  }

  std::mutex run_mu_;     // held by the region on the pool
  std::mutex config_mu_;  // threads_, workers_
  int threads_ = 0;
  std::vector<std::thread> workers_;

  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  bool stop_ = false;
  std::atomic<uint64_t> generation_{0};  // written under mu_; read by spinners
  const absl::FunctionRef<void(int)>* task_ = nullptr;
  int chunks_ = 0;
  std::atomic<int> busy_workers_{0};  // workers that have not finished the current region
  std::atomic<int> next_{0};
};

Pool& ThePool() {
  static Pool* pool = new Pool();  // never destroyed: workers may outlive main's statics
  return *pool;
}

}  // namespace

void SetComputeThreads(int n) { ThePool().SetThreads(n); }

int ComputeThreads() { return ThePool().threads(); }

int ParallelChunks(int64_t n, int64_t grain) {
  if (n <= 0) return 0;
  const int64_t g = std::max<int64_t>(grain, 1);
  const int64_t by_grain = (n + g - 1) / g;
  return static_cast<int>(std::max<int64_t>(
      1, std::min<int64_t>(int64_t{kChunksPerThread} * ComputeThreads(), by_grain)));
}

void ParallelFor(int64_t n, int64_t grain,
                 absl::FunctionRef<void(int chunk, int64_t begin, int64_t end)> fn) {
  const int chunks = ParallelChunks(n, grain);
  if (chunks == 0) return;
  const ScopedFlushDenormals flush;  // the caller's chunks, like the workers'
  ThePool().Run(chunks, [&](int c) { fn(c, c * n / chunks, (c + 1) * n / chunks); });
}

}  // namespace kubetrain
