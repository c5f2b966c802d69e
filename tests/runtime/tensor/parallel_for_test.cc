#include "runtime/tensor/parallel_for.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/tensor/blas.h"

namespace kubetrain {
namespace {

// Restores the thread count a test changed.
class ParallelForTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = ComputeThreads(); }
  void TearDown() override { SetBlasThreads(saved_); }
  int saved_ = 1;
};

TEST_F(ParallelForTest, ChunksDependOnSizeGrainAndThreadsOnly) {
  SetBlasThreads(3);
  EXPECT_EQ(ComputeThreads(), 3);
  EXPECT_EQ(ParallelChunks(0, 1), 0);
  EXPECT_EQ(ParallelChunks(1, 1), 1);
  EXPECT_EQ(ParallelChunks(2, 1), 2);
  EXPECT_EQ(ParallelChunks(100, 1), 12);  // 4 per thread at most
  EXPECT_EQ(ParallelChunks(100, 40), 3);
  EXPECT_EQ(ParallelChunks(100, 50), 2);
  EXPECT_EQ(ParallelChunks(100, 1000), 1);
  SetBlasThreads(1);
  EXPECT_EQ(ParallelChunks(100, 1), 4);
}

TEST_F(ParallelForTest, CoversEveryIndexOnceInContiguousChunks) {
  for (int threads : {1, 2, 4}) {
    SetBlasThreads(threads);
    for (int64_t n : {1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      const int chunks = ParallelChunks(n, 1);
      std::vector<std::pair<int64_t, int64_t>> ranges(static_cast<size_t>(chunks));
      ParallelFor(n, 1, [&](int chunk, int64_t begin, int64_t end) {
        ranges[static_cast<size_t>(chunk)] = {begin, end};
        for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << i;
      int64_t next = 0;
      for (int c = 0; c < chunks; ++c) {
        EXPECT_EQ(ranges[static_cast<size_t>(c)].first, next);
        EXPECT_EQ(ranges[static_cast<size_t>(c)].first, c * n / chunks);
        next = ranges[static_cast<size_t>(c)].second;
      }
      EXPECT_EQ(next, n);
    }
  }
}

TEST_F(ParallelForTest, RunsChunksOnSeveralThreads) {
  SetBlasThreads(2);
  // Whichever chunk runs first, the other starts while it is still running
  // only if two threads run them: chunk 0 waits (up to a deadline) for
  // chunk 1 to start. On one thread, chunk 0 runs to its deadline alone.
  std::atomic<bool> second_started{false};
  std::atomic<bool> saw_second{false};
  ParallelFor(2, 1, [&](int chunk, int64_t, int64_t) {
    if (chunk == 1) {
      second_started = true;
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!second_started && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    saw_second = second_started.load();
  });
  EXPECT_TRUE(saw_second);
}

TEST_F(ParallelForTest, NestedAndConcurrentRegionsRunInline) {
  SetBlasThreads(2);
  std::atomic<int64_t> sum{0};
  ParallelFor(4, 1, [&](int, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      ParallelFor(10, 1, [&](int, int64_t b, int64_t e) { sum += e - b; });
    }
  });
  EXPECT_EQ(sum, 40);
  std::vector<std::thread> callers;
  std::atomic<int64_t> total{0};
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int r = 0; r < 100; ++r) {
        ParallelFor(1000, 1, [&](int, int64_t b, int64_t e) { total += e - b; });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(total, 4 * 100 * 1000);
}

TEST_F(ParallelForTest, OneThreadRunsEveryChunkOnTheCaller) {
  SetBlasThreads(1);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> elsewhere{0};
  ParallelFor(100, 1, [&](int, int64_t, int64_t) {
    if (std::this_thread::get_id() != caller) elsewhere++;
  });
  EXPECT_EQ(elsewhere, 0);
}

TEST_F(ParallelForTest, HoldsOpenBlasToOneThreadInsideARegion) {
  SetBlasThreads(2);
  std::atomic<int> inside{0};
  ParallelFor(2, 1, [&](int, int64_t, int64_t) { inside = BlasThreads(); });
  EXPECT_EQ(inside, 1);
  EXPECT_EQ(BlasThreads(), 2);
}

}  // namespace
}  // namespace kubetrain
