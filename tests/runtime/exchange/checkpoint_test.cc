// The checkpoint format's data position (data_epoch, data_cursor): written
// and read back, absent in headers without it, and refused when half there
// or negative.
#include "runtime/exchange/checkpoint.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_files.h"

namespace kubetrain::exchange {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;

const std::vector<float> kParams = {1, 2, 3};

// A one-shard checkpoint at `step` of a header `h` (range and step filled in).
absl::StatusOr<std::string> Write(const std::string& dir, int64_t step, v1::CheckpointHeader h) {
  h.set_num_shards(1);
  h.mutable_range()->set_length(kParams.size());
  h.set_num_params(kParams.size());
  h.set_global_step(step);
  CheckpointView view{.header = h, .params = kParams, .states = {}};
  return WriteCheckpoint(dir, view, /*keep=*/5);
}

TEST(CheckpointDataPosition, RoundTrips) {
  data::testing_util::TempDir dir;
  for (const DataPosition& p : {DataPosition{.epoch = 3, .cursor = 1234},
                                DataPosition{.epoch = 0, .cursor = 0},  // present, not "unknown"
                                DataPosition{.epoch = int64_t{1} << 40, .cursor = 59999}}) {
    v1::CheckpointHeader h;
    SetDataPosition(p, h);
    absl::StatusOr<std::string> path = Write(dir.path(), 10, h);
    ASSERT_TRUE(path.ok()) << path.status();
    absl::StatusOr<CheckpointData> d = ReadCheckpoint(*path);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_THAT(d->data_position, Optional(p));
    EXPECT_THAT(DataPositionOf(d->header), Optional(p));
    EXPECT_TRUE(d->header.has_data_epoch());
    EXPECT_EQ(d->header.data_cursor(), p.cursor);
    EXPECT_EQ(d->params, kParams);
  }
}

// Checkpoints from before the fields, and from writers that do not know the
// position, have none: the reader derives it from the global step.
TEST(CheckpointDataPosition, AbsentWhenNotWritten) {
  data::testing_util::TempDir dir;
  absl::StatusOr<std::string> path = Write(dir.path(), 7, v1::CheckpointHeader());
  ASSERT_TRUE(path.ok()) << path.status();
  absl::StatusOr<CheckpointData> d = ReadCheckpoint(*path);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->data_position, std::nullopt);
  EXPECT_EQ(DataPositionOf(d->header), std::nullopt);
  EXPECT_FALSE(d->header.has_data_epoch());
  EXPECT_FALSE(d->header.has_data_cursor());
  EXPECT_EQ(d->header.global_step(), 7);
}

TEST(CheckpointDataPosition, HalfAPairOrANegativeValueIsCorrupt) {
  data::testing_util::TempDir dir;
  v1::CheckpointHeader good;
  SetDataPosition({.epoch = 1, .cursor = 2}, good);
  ASSERT_TRUE(Write(dir.path(), 1, good).ok());

  v1::CheckpointHeader epoch_only;
  epoch_only.set_data_epoch(2);
  absl::StatusOr<std::string> path = Write(dir.path(), 2, epoch_only);
  ASSERT_TRUE(path.ok());
  absl::StatusOr<CheckpointData> d = ReadCheckpoint(*path);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("data_epoch without data_cursor"));

  v1::CheckpointHeader negative;
  SetDataPosition({.epoch = 0, .cursor = -5}, negative);
  path = Write(dir.path(), 3, negative);
  ASSERT_TRUE(path.ok());
  d = ReadCheckpoint(*path);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("negative data position"));

  // The newest that verifies is the one with a whole position.
  std::vector<std::string> warnings;
  d = LoadLatestCheckpoint(dir.path(), 0, 1, [&](const std::string& w) { warnings.push_back(w); });
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->header.global_step(), 1);
  EXPECT_THAT(d->data_position, Optional(DataPosition{.epoch = 1, .cursor = 2}));
  EXPECT_EQ(warnings.size(), 2u);
}

}  // namespace
}  // namespace kubetrain::exchange
