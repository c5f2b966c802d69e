// Slow-start batches: 1, 2, 4, ... operations at once, stopping after the
// batch that failed.
#include "operator/controller/slow_start.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kubetrain::controller {
namespace {

// `n` operations; operation `fail_at` (if any) fails; `ran[i]` says which
// ran.
std::vector<SlowStartOp> Ops(int n, std::vector<std::atomic<bool>>& ran, int fail_at = -1) {
  std::vector<SlowStartOp> ops;
  for (int i = 0; i < n; ++i) {
    ops.push_back([&ran, i, fail_at]() -> absl::Status {
      ran[i] = true;
      if (i == fail_at) return absl::ResourceExhaustedError(absl::StrCat("quota at ", i));
      return absl::OkStatus();
    });
  }
  return ops;
}

std::vector<int> Ran(const std::vector<std::atomic<bool>>& ran) {
  std::vector<int> out;
  for (size_t i = 0; i < ran.size(); ++i) {
    if (ran[i]) out.push_back(static_cast<int>(i));
  }
  return out;
}

TEST(SlowStartTest, RunsEveryOperation) {
  std::vector<std::atomic<bool>> ran(20);
  EXPECT_TRUE(RunSlowStart(Ops(20, ran), 4).ok());
  EXPECT_EQ(Ran(ran).size(), 20u);
  EXPECT_TRUE(RunSlowStart({}, 4).ok());
}

// Batches 1, 2, 4, 8: a failure at index 4 (the third batch, 3..6) lets its
// batch finish and stops the rest.
TEST(SlowStartTest, ABatchThatFailsStopsTheRest) {
  std::vector<std::atomic<bool>> ran(20);
  const absl::Status s = RunSlowStart(Ops(20, ran, /*fail_at=*/4), 16);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "quota at 4");
  EXPECT_EQ(Ran(ran), (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
}

TEST(SlowStartTest, TheFirstOperationFailingCostsOneRequest) {
  std::vector<std::atomic<bool>> ran(20);
  EXPECT_FALSE(RunSlowStart(Ops(20, ran, /*fail_at=*/0), 16).ok());
  EXPECT_EQ(Ran(ran), (std::vector<int>{0}));
}

// Batches stop growing at max_parallel: with 2, they are 1, 2, 2, 2, ...
TEST(SlowStartTest, BatchesGrowUpToMaxParallel) {
  std::vector<std::atomic<bool>> ran(20);
  EXPECT_FALSE(RunSlowStart(Ops(20, ran, /*fail_at=*/5), 2).ok());
  EXPECT_EQ(Ran(ran), (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
}

TEST(SlowStartTest, AnExceptionIsAnInternalError) {
  const absl::Status s =
      RunSlowStart({[]() -> absl::Status { throw std::runtime_error("boom"); }}, 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "exception: boom");
}

TEST(SlowStartTest, SideBySideRunsBothAndReportsTheFirstsError) {
  std::vector<std::atomic<bool>> a_ran(5), b_ran(5);
  EXPECT_TRUE(RunSlowStartSideBySide(Ops(5, a_ran), Ops(5, b_ran), 4).ok());
  EXPECT_EQ(Ran(a_ran).size(), 5u);
  EXPECT_EQ(Ran(b_ran).size(), 5u);
  std::vector<std::atomic<bool>> c_ran(5), d_ran(5);
  const absl::Status both = RunSlowStartSideBySide(Ops(5, c_ran, 0), Ops(5, d_ran, 0), 4);
  EXPECT_EQ(both.message(), "quota at 0");
  EXPECT_EQ(Ran(c_ran), (std::vector<int>{0}));
  EXPECT_EQ(Ran(d_ran), (std::vector<int>{0}));
  std::vector<std::atomic<bool>> e_ran(3);
  EXPECT_TRUE(RunSlowStartSideBySide(Ops(3, e_ran), {}, 4).ok());
  EXPECT_EQ(Ran(e_ran).size(), 3u);
}

}  // namespace
}  // namespace kubetrain::controller
