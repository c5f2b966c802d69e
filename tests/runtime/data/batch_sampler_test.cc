#include "runtime/data/batch_sampler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include "absl/status/status.h"

namespace kubetrain::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

BatchSampler MustCreate(int64_t n, int64_t batch, uint64_t seed, int shard, int shards,
                        bool shuffle = true, bool drop_last = false) {
  absl::StatusOr<BatchSampler> s =
      BatchSampler::Create(n, batch, seed, shard, shards, shuffle, drop_last);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

std::vector<int64_t> Vec(std::span<const int64_t> s) { return {s.begin(), s.end()}; }

// Concatenates the batches of one epoch.
std::vector<int64_t> OneEpoch(BatchSampler& s) {
  std::vector<int64_t> out;
  for (int64_t b = 0; b < s.BatchesPerEpoch(); ++b) {
    std::span<const int64_t> batch = s.NextBatch();
    out.insert(out.end(), batch.begin(), batch.end());
  }
  return out;
}

TEST(BatchSamplerTest, SameSeedSameOrder) {
  BatchSampler a = MustCreate(100, 8, 42, 0, 1);
  BatchSampler b = MustCreate(100, 8, 42, 0, 1);
  for (int i = 0; i < 40; ++i) {
    std::span<const int64_t> x = a.NextBatch();
    std::span<const int64_t> y = b.NextBatch();
    ASSERT_TRUE(std::equal(x.begin(), x.end(), y.begin(), y.end())) << "batch " << i;
  }
}

TEST(BatchSamplerTest, DifferentSeedDifferentOrder) {
  BatchSampler a = MustCreate(100, 100, 1, 0, 1);
  BatchSampler b = MustCreate(100, 100, 2, 0, 1);
  EXPECT_NE(OneEpoch(a), OneEpoch(b));
}

TEST(BatchSamplerTest, EpochsArePermutationsAndDiffer) {
  BatchSampler s = MustCreate(50, 7, 9, 0, 1);
  EXPECT_EQ(s.BatchesPerEpoch(), 8);
  EXPECT_EQ(s.epoch(), 0);
  std::vector<int64_t> e0 = OneEpoch(s);
  EXPECT_EQ(s.epoch(), 1);
  EXPECT_EQ(s.batch_in_epoch(), 0);
  std::vector<int64_t> e1 = OneEpoch(s);
  EXPECT_NE(e0, e1);
  std::vector<int64_t> identity(50);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_NE(e0, identity);
  std::sort(e0.begin(), e0.end());
  std::sort(e1.begin(), e1.end());
  EXPECT_EQ(e0, identity);
  EXPECT_EQ(e1, identity);
}

TEST(BatchSamplerTest, PermutationIsPinned) {
  // The PRNG is ours, so the order must never change across platforms or
  // releases (checkpoints depend on it). Values cross-checked against an
  // independent Python implementation of splitmix64 + Lemire + Fisher-Yates.
  EXPECT_THAT(BatchSampler::EpochPermutation(10, 42, 0, true),
              ElementsAre(6, 7, 0, 1, 3, 2, 8, 5, 4, 9));
  EXPECT_THAT(BatchSampler::EpochPermutation(10, 42, 1, true),
              ElementsAre(5, 1, 6, 3, 7, 2, 8, 4, 0, 9));
  EXPECT_THAT(BatchSampler::EpochPermutation(5, 42, 0, false), ElementsAre(0, 1, 2, 3, 4));
}

TEST(BatchSamplerTest, NoShuffleIsSequential) {
  BatchSampler s = MustCreate(7, 3, 5, 0, 1, /*shuffle=*/false);
  EXPECT_THAT(Vec(s.NextBatch()), ElementsAre(0, 1, 2));
  EXPECT_THAT(Vec(s.NextBatch()), ElementsAre(3, 4, 5));
  EXPECT_THAT(Vec(s.NextBatch()), ElementsAre(6));
  EXPECT_THAT(Vec(s.NextBatch()), ElementsAre(0, 1, 2));
}

void CheckShardsPartitionEpochs(int64_t n, int shards, int64_t batch) {
  for (bool shuffle : {true, false}) {
    std::vector<BatchSampler> samplers;
    for (int i = 0; i < shards; ++i)
      samplers.push_back(MustCreate(n, batch, 77, i, shards, shuffle));
    for (int epoch = 0; epoch < 3; ++epoch) {
      std::vector<int64_t> all;
      for (int i = 0; i < shards; ++i) {
        BatchSampler& s = samplers[i];
        EXPECT_EQ(s.ShardSize(), n / shards + (i < n % shards ? 1 : 0));
        std::vector<int64_t> mine = OneEpoch(s);
        EXPECT_EQ(static_cast<int64_t>(mine.size()), s.ShardSize());
        all.insert(all.end(), mine.begin(), mine.end());
      }
      std::sort(all.begin(), all.end());
      std::vector<int64_t> expected(n);
      std::iota(expected.begin(), expected.end(), 0);
      EXPECT_EQ(all, expected) << "n=" << n << " shards=" << shards << " epoch=" << epoch
                               << " shuffle=" << shuffle;
    }
  }
}

TEST(BatchSamplerTest, ShardsAreDisjointAndCoverEveryEpoch) {
  CheckShardsPartitionEpochs(10, 3, 2);
  CheckShardsPartitionEpochs(1000, 4, 32);
  CheckShardsPartitionEpochs(1001, 4, 32);
}

TEST(BatchSamplerTest, ShardSizesDifferByAtMostOne) {
  EXPECT_EQ(MustCreate(10, 2, 0, 0, 3).ShardSize(), 4);
  EXPECT_EQ(MustCreate(10, 2, 0, 1, 3).ShardSize(), 3);
  EXPECT_EQ(MustCreate(10, 2, 0, 2, 3).ShardSize(), 3);
}

TEST(BatchSamplerTest, DropLast) {
  BatchSampler keep = MustCreate(10, 4, 3, 0, 1, true, /*drop_last=*/false);
  EXPECT_EQ(keep.BatchesPerEpoch(), 3);
  EXPECT_EQ(keep.NextBatch().size(), 4u);
  EXPECT_EQ(keep.NextBatch().size(), 4u);
  EXPECT_EQ(keep.NextBatch().size(), 2u);
  EXPECT_EQ(keep.epoch(), 1);

  BatchSampler drop = MustCreate(10, 4, 3, 0, 1, true, /*drop_last=*/true);
  EXPECT_EQ(drop.BatchesPerEpoch(), 2);
  std::vector<int64_t> e0 = OneEpoch(drop);
  EXPECT_EQ(e0.size(), 8u);
  EXPECT_EQ(drop.epoch(), 1);
  // The kept samples are the first 8 of the same permutation.
  BatchSampler ref = MustCreate(10, 4, 3, 0, 1, true, false);
  std::vector<int64_t> full = OneEpoch(ref);
  EXPECT_TRUE(std::equal(e0.begin(), e0.end(), full.begin()));
  EXPECT_EQ(drop.NextBatch().size(), 4u);
}

TEST(BatchSamplerTest, SetPositionContinuesLikeUninterruptedRun) {
  BatchSampler full = MustCreate(103, 10, 1234, 1, 3);  // 35 samples, 4 batches/epoch.
  ASSERT_EQ(full.BatchesPerEpoch(), 4);
  std::vector<std::vector<int64_t>> reference;
  for (int i = 0; i < 30; ++i) {
    std::span<const int64_t> b = full.NextBatch();
    reference.emplace_back(b.begin(), b.end());
  }
  for (int start : {0, 3, 4, 9, 17, 29}) {
    BatchSampler restarted = MustCreate(103, 10, 1234, 1, 3);
    restarted.SetPosition(start / 4, start % 4);
    EXPECT_EQ(restarted.epoch(), start / 4);
    EXPECT_EQ(restarted.batch_in_epoch(), start % 4);
    for (int i = start; i < 30; ++i) {
      std::span<const int64_t> b = restarted.NextBatch();
      ASSERT_EQ(std::vector<int64_t>(b.begin(), b.end()), reference[i]) << "start " << start;
    }
  }
  // A global step carries into epochs; negative values clamp to 0.
  BatchSampler s = MustCreate(103, 10, 1234, 1, 3);
  s.SetPosition(0, 9);
  EXPECT_EQ(s.epoch(), 2);
  EXPECT_EQ(s.batch_in_epoch(), 1);
  s.SetPosition(-5, -1);
  EXPECT_EQ(s.epoch(), 0);
  EXPECT_EQ(s.batch_in_epoch(), 0);
}

TEST(BatchSamplerTest, SpanStaysValidAcrossEpochBoundary) {
  BatchSampler s = MustCreate(6, 3, 8, 0, 1);
  s.NextBatch();
  std::span<const int64_t> last = s.NextBatch();  // Last batch of epoch 0.
  std::vector<int64_t> copy(last.begin(), last.end());
  EXPECT_EQ(s.epoch(), 1);
  EXPECT_EQ(std::vector<int64_t>(last.begin(), last.end()), copy);
}

TEST(BatchSamplerTest, InvalidArguments) {
  auto message = [](int64_t n, int64_t batch, int shard, int shards, bool drop_last) {
    absl::StatusOr<BatchSampler> s =
        BatchSampler::Create(n, batch, 0, shard, shards, true, drop_last);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.status().message());
  };
  EXPECT_THAT(message(10, 0, 0, 1, false), HasSubstr("batch_size must be > 0, got 0"));
  EXPECT_THAT(message(10, -4, 0, 1, false), HasSubstr("batch_size must be > 0, got -4"));
  EXPECT_THAT(message(0, 4, 0, 1, false), HasSubstr("dataset_size must be > 0, got 0"));
  EXPECT_THAT(message(10, 4, 0, 0, false), HasSubstr("num_shards must be > 0, got 0"));
  EXPECT_THAT(message(10, 4, 3, 3, false), HasSubstr("shard_index 3 is outside [0, 3)"));
  EXPECT_THAT(message(10, 4, -1, 3, false), HasSubstr("shard_index -1 is outside [0, 3)"));
  EXPECT_THAT(message(3, 4, 3, 4, false),
              HasSubstr("shard 3 of 4 is empty: the dataset has only 3 samples"));
  EXPECT_THAT(message(10, 8, 1, 2, true),
              HasSubstr("drop_last with batch_size 8 > shard size 5 (shard 1 of 2)"));

  // The raw constructor with bad arguments yields an empty sampler, not a crash.
  BatchSampler bad(10, 0, 0, 0, 1, true, false);
  EXPECT_EQ(bad.BatchesPerEpoch(), 0);
  EXPECT_TRUE(bad.NextBatch().empty());
  bad.SetPosition(3, 4);
}

TEST(GatherBatchTest, CopiesSelectedSamplesContiguously) {
  Dataset ds;
  ds.sample_shape = {2, 1};
  ds.features = {0, 1, 10, 11, 20, 21, 30, 31};
  ds.labels = {5, 6, 7, 8};
  ds.num_classes = 9;
  const std::vector<int64_t> indices = {3, 0, 3, 2};
  std::vector<float> features(indices.size() * 2, -1);
  std::vector<int32_t> labels(indices.size(), -1);
  GatherBatch(ds, indices, features.data(), labels.data());
  EXPECT_THAT(features, ElementsAre(30, 31, 0, 1, 30, 31, 20, 21));
  EXPECT_THAT(labels, ElementsAre(8, 5, 8, 7));

  std::vector<int32_t> only_labels(2, -1);
  GatherBatch(ds, std::span<const int64_t>(indices).first(2), nullptr, only_labels.data());
  EXPECT_THAT(only_labels, ElementsAre(8, 5));
}

TEST(GatherBatchTest, WorksWithSamplerBatches) {
  Dataset ds;
  ds.sample_shape = {3};
  for (int i = 0; i < 20; ++i) {
    ds.labels.push_back(i % 4);
    for (int j = 0; j < 3; ++j) ds.features.push_back(static_cast<float>(i * 100 + j));
  }
  BatchSampler s = MustCreate(ds.size(), 6, 11, 0, 1);
  std::vector<float> features(6 * 3);
  std::vector<int32_t> labels(6);
  for (int b = 0; b < 7; ++b) {
    std::span<const int64_t> batch = s.NextBatch();
    GatherBatch(ds, batch, features.data(), labels.data());
    for (size_t k = 0; k < batch.size(); ++k) {
      EXPECT_EQ(labels[k], batch[k] % 4);
      EXPECT_EQ(features[k * 3 + 2], static_cast<float>(batch[k] * 100 + 2));
    }
  }
}

}  // namespace
}  // namespace kubetrain::data
