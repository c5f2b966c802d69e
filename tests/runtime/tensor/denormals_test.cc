#include "runtime/tensor/denormals.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/tensor/blas.h"
#include "runtime/tensor/parallel_for.h"
#include "tests/support/denormal_mode.h"

namespace kubetrain {
namespace {

using testing::IsSubnormal;
using testing::ScopedKeepDenormals;
using testing::Subnormal;

// Arithmetic through a volatile, so the compiler cannot fold it.
float Half(float x) {
  volatile float v = x;
  return v * 0.5f;
}

TEST(Denormals, FlushedThreadsTurnSubnormalInputsAndResultsIntoZero) {
  if (!testing::kHasDenormalControl) GTEST_SKIP() << "no MXCSR on this CPU";
  ScopedKeepDenormals keep;
  ASSERT_FALSE(DenormalsFlushedInThisThread());
  EXPECT_TRUE(IsSubnormal(Half(Subnormal())));  // kept: a slow subnormal result
  {
    ScopedFlushDenormals flush;
    EXPECT_TRUE(DenormalsFlushedInThisThread());
    EXPECT_EQ(Half(Subnormal()), 0.0f);                        // DAZ: the input reads as zero
    EXPECT_EQ(Half(std::numeric_limits<float>::min()), 0.0f);  // FTZ: the result
  }
  EXPECT_FALSE(DenormalsFlushedInThisThread()) << "the scope restores the thread's mode";
  FlushDenormalsInThisThread();
  EXPECT_TRUE(DenormalsFlushedInThisThread());
}

TEST(Denormals, EveryThreadOfTheComputePoolFlushes) {
  if (!testing::kHasDenormalControl) GTEST_SKIP() << "no MXCSR on this CPU";
  const int saved = ComputeThreads();
  SetBlasThreads(2);  // the pool's worker starts from this thread, which keeps denormals
  ScopedKeepDenormals keep;
  std::mutex mu;
  std::set<std::thread::id> threads;
  std::vector<bool> flushed;
  std::vector<float> halves;
  std::atomic<int> entered{0};
  ParallelFor(8, 1, [&](int, int64_t, int64_t) {
    // Hold the first chunks until the pool's worker has taken one too, so
    // both threads are read (bounded: a worker starved for 10 s still lets
    // the test end, and then fails the thread count below).
    ++entered;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (entered.load() < 2 && std::chrono::steady_clock::now() < until) {
      std::this_thread::yield();
    }
    std::lock_guard<std::mutex> l(mu);
    threads.insert(std::this_thread::get_id());
    flushed.push_back(DenormalsFlushedInThisThread());
    halves.push_back(Half(Subnormal()));
  });
  SetBlasThreads(saved);
  EXPECT_EQ(threads.size(), 2u) << "the caller and the pool's worker both ran chunks";
  for (size_t i = 0; i < flushed.size(); ++i) {
    EXPECT_TRUE(flushed[i]) << "chunk " << i;
    EXPECT_EQ(halves[i], 0.0f) << "chunk " << i;
  }
  EXPECT_FALSE(DenormalsFlushedInThisThread()) << "the caller's mode is its own again";
}

}  // namespace
}  // namespace kubetrain
