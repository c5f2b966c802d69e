// CheckpointPolicy: the cadence on a fake clock, the header it fills, and the
// one rule for a failed write, against a filesystem that fails on demand.
#include "runtime/exchange/checkpoint_policy.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/exchange/checkpoint.h"
#include "runtime/metrics/runtime_metrics.h"
#include "tests/support/temp_files.h"

namespace kubetrain::exchange {
namespace {

using ::testing::HasSubstr;

// The filesystem: records each write; fails while `failing` is set.
struct FakeDisk {
  bool failing = false;
  std::vector<int64_t> written;  // global steps
  int attempts = 0;
  CheckpointWriter Writer() {
    return [this](const std::string& dir, const CheckpointView& view,
                  int) -> absl::StatusOr<std::string> {
      ++attempts;
      if (failing) return absl::InternalError(dir + ": write: No space left on device");
      written.push_back(view.header.global_step());
      return dir + "/ckpt";
    };
  }
};

struct PolicyFixture {
  explicit PolicyFixture(int64_t every_steps, double every_seconds, bool with_metrics = false)
      : metrics({.constant_labels = {}, .ps_server = true}),
        policy(
            {.dir = "/ckpt",
             .every_steps = every_steps,
             .every_seconds = every_seconds,
             .keep = 3,
             .write = disk.Writer()},
            clock, [this](const std::string& m) { log.push_back(m); },
            with_metrics ? &metrics : nullptr) {}
  double FailureMetric() {
    for (const auto& f : metrics.registry()->Collect()) {
      if (f.name == "kubetrain_checkpoint_failures_total") return f.metric.at(0).counter.value;
    }
    ADD_FAILURE() << "no kubetrain_checkpoint_failures_total";
    return -1;
  }

  FakeClock clock;
  FakeDisk disk;
  std::vector<std::string> log;
  std::vector<float> params = std::vector<float>(4, 1.0f);
  std::function<absl::Status(CheckpointContents&)> fill = [this](CheckpointContents& c) {
    c.params = params;
    return absl::OkStatus();
  };
  metrics::RuntimeMetrics metrics;
  CheckpointPolicy policy;
};

TEST(CheckpointPolicy, WritesEveryNSteps) {
  PolicyFixture f(/*every_steps=*/3, /*every_seconds=*/0);
  f.policy.Restart(10);
  for (int64_t step = 11; step <= 17; ++step) f.policy.MaybeWrite(step, f.fill);
  EXPECT_EQ(f.disk.written, (std::vector<int64_t>{13, 16}));
}

TEST(CheckpointPolicy, WritesEverySSecondsOnTheClock) {
  PolicyFixture f(/*every_steps=*/0, /*every_seconds=*/30);
  f.policy.Restart(0);
  EXPECT_FALSE(f.policy.MaybeWrite(1, f.fill));
  f.clock.AdvanceSeconds(29);
  EXPECT_FALSE(f.policy.MaybeWrite(2, f.fill));
  f.clock.AdvanceSeconds(1);
  EXPECT_TRUE(f.policy.MaybeWrite(3, f.fill));
  EXPECT_FALSE(f.policy.MaybeWrite(4, f.fill));  // the interval starts again
  f.clock.AdvanceSeconds(30);
  EXPECT_TRUE(f.policy.MaybeWrite(5, f.fill));
  EXPECT_EQ(f.disk.written, (std::vector<int64_t>{3, 5}));
}

TEST(CheckpointPolicy, WithoutADirectoryNothingIsDueAndARequestFails) {
  FakeClock clock;
  CheckpointPolicy off({.dir = "", .every_steps = 1, .every_seconds = 1}, clock,
                       [](const std::string&) {});
  EXPECT_FALSE(off.enabled());
  clock.AdvanceSeconds(10);
  EXPECT_FALSE(off.Due(100));
  auto fill = [](CheckpointContents&) { return absl::OkStatus(); };
  EXPECT_EQ(off.WriteNow(100, fill).status().code(), absl::StatusCode::kFailedPrecondition);
}

// A periodic write that fails is logged and counted, training goes on, and
// the write is tried again one interval later, where it succeeds once the
// disk does.
TEST(CheckpointPolicy, AFailedPeriodicWriteIsLoggedCountedAndRetriedWhenNextDue) {
  PolicyFixture f(/*every_steps=*/2, /*every_seconds=*/0, /*with_metrics=*/true);
  f.policy.Restart(0);
  f.disk.failing = true;
  EXPECT_FALSE(f.policy.MaybeWrite(1, f.fill));
  EXPECT_EQ(f.disk.attempts, 0);
  EXPECT_FALSE(f.policy.MaybeWrite(2, f.fill));  // due, fails
  EXPECT_EQ(f.disk.attempts, 1);
  EXPECT_EQ(f.policy.failures(), 1);
  EXPECT_EQ(f.FailureMetric(), 1);
  ASSERT_FALSE(f.log.empty());
  EXPECT_THAT(f.log.back(), HasSubstr("checkpoint at step 2 failed"));
  EXPECT_THAT(f.log.back(), HasSubstr("No space left on device"));
  EXPECT_FALSE(f.policy.MaybeWrite(3, f.fill));  // not one attempt per step
  EXPECT_EQ(f.disk.attempts, 1);
  f.disk.failing = false;
  EXPECT_TRUE(f.policy.MaybeWrite(4, f.fill));  // the next due step
  EXPECT_EQ(f.disk.written, (std::vector<int64_t>{4}));
  EXPECT_EQ(f.FailureMetric(), 1);
}

// A final or requested checkpoint returns its error; the cadence is left
// as it was, so the next periodic one is still due on time.
TEST(CheckpointPolicy, AFinalOrRequestedWriteReturnsItsError) {
  PolicyFixture f(/*every_steps=*/5, /*every_seconds=*/0, /*with_metrics=*/true);
  f.policy.Restart(0);
  f.disk.failing = true;
  absl::StatusOr<std::string> path = f.policy.WriteNow(3, f.fill);
  EXPECT_EQ(path.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(path.status().message()), HasSubstr("No space left on device"));
  EXPECT_EQ(f.policy.failures(), 0);  // the caller has the error
  EXPECT_EQ(f.FailureMetric(), 0);
  f.disk.failing = false;
  EXPECT_TRUE(f.policy.MaybeWrite(5, f.fill));
  ASSERT_TRUE(f.policy.WriteNow(6, f.fill).ok());
  EXPECT_EQ(f.disk.written, (std::vector<int64_t>{5, 6}));
  EXPECT_FALSE(f.policy.Due(10));  // counted from the requested one
  EXPECT_TRUE(f.policy.Due(11));
}

// A contents filler that fails (a device copy, say) is a failed write.
TEST(CheckpointPolicy, AFillThatFailsIsAFailedWrite) {
  PolicyFixture f(/*every_steps=*/1, /*every_seconds=*/0);
  auto broken = [](CheckpointContents&) { return absl::InternalError("device lost"); };
  EXPECT_FALSE(f.policy.MaybeWrite(1, broken));
  EXPECT_EQ(f.policy.failures(), 1);
  EXPECT_EQ(f.disk.attempts, 0);
  EXPECT_EQ(f.policy.WriteNow(2, broken).status().code(), absl::StatusCode::kInternal);
}

// The header is filled from the contents, and the real writer's file reads
// back whole.
TEST(CheckpointPolicy, WritesTheContentsThroughTheCheckpointFormat) {
  data::testing_util::TempDir dir;
  FakeClock clock;
  CheckpointPolicy policy({.dir = dir.path(), .every_steps = 1, .keep = 2}, clock,
                          [](const std::string&) {});
  const std::vector<float> params = {1, 2, 3};
  const std::vector<float> velocity = {4, 5, 6};
  auto fill = [&](CheckpointContents& c) {
    c.shard_index = 1;
    c.num_shards = 2;
    c.offset = 3;
    c.num_params = 6;
    c.total_steps = 100;
    c.optimizer = "momentum";
    c.optimizer_steps = 7;
    c.params = params;
    c.states = {{"velocity", velocity}};
    c.worker_clocks = {7, 6};
    return absl::OkStatus();
  };
  absl::StatusOr<std::string> path = policy.WriteNow(7, fill);
  ASSERT_TRUE(path.ok()) << path.status();
  absl::StatusOr<CheckpointData> d = ReadCheckpoint(*path);
  ASSERT_TRUE(d.ok()) << d.status();
  const v1::CheckpointHeader& h = d->header;
  EXPECT_EQ(h.shard_index(), 1);
  EXPECT_EQ(h.num_shards(), 2);
  EXPECT_EQ(h.range().offset(), 3u);
  EXPECT_EQ(h.range().length(), 3u);
  EXPECT_EQ(h.num_params(), 6u);
  EXPECT_EQ(h.global_step(), 7);
  EXPECT_EQ(h.total_steps(), 100);
  EXPECT_EQ(h.optimizer(), "momentum");
  EXPECT_EQ(h.optimizer_steps(), 7);
  ASSERT_EQ(h.worker_clocks_size(), 2);
  EXPECT_EQ(h.worker_clocks(1), 6);
  ASSERT_EQ(h.state_names_size(), 1);
  EXPECT_EQ(h.state_names(0), "velocity");
  EXPECT_EQ(d->params, params);
  EXPECT_EQ(d->states.at(0), velocity);
  EXPECT_EQ(d->data_position, std::nullopt);  // the fill did not know it
}

// A writer that knows the data position puts it in the header.
TEST(CheckpointPolicy, WritesTheDataPositionWhenKnown) {
  data::testing_util::TempDir dir;
  FakeClock clock;
  CheckpointPolicy policy({.dir = dir.path(), .every_steps = 1}, clock, [](const std::string&) {});
  const std::vector<float> params = {1, 2};
  auto fill = [&](CheckpointContents& c) {
    c.params = params;
    c.num_params = 2;
    c.data_position = DataPosition{.epoch = 4, .cursor = 96};
    return absl::OkStatus();
  };
  absl::StatusOr<std::string> path = policy.WriteNow(12, fill);
  ASSERT_TRUE(path.ok()) << path.status();
  absl::StatusOr<CheckpointData> d = ReadCheckpoint(*path);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->header.data_epoch(), 4);
  EXPECT_EQ(d->header.data_cursor(), 96);
  EXPECT_EQ(d->data_position, (DataPosition{.epoch = 4, .cursor = 96}));
}

}  // namespace
}  // namespace kubetrain::exchange
