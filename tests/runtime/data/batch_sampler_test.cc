#include "runtime/data/batch_sampler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <utility>
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

// The stride sharding BatchSampler did before its world-wide cursor, kept
// verbatim in substance as the reference a fixed world must reproduce: shard
// i of n takes the permutation positions p with p % n == i, in order, cut
// into batches of its own; each shard moves to its next epoch after its own
// last batch.
class StrideReference {
 public:
  StrideReference(int64_t n, int64_t batch, uint64_t seed, int shard, int shards, bool shuffle,
                  bool drop_last)
      : n_(n), batch_(batch), seed_(seed), shard_(shard), shards_(shards), shuffle_(shuffle) {
    shard_size_ = n / shards + (shard < n % shards ? 1 : 0);
    batches_per_epoch_ = drop_last ? shard_size_ / batch : (shard_size_ + batch - 1) / batch;
  }

  int64_t BatchesPerEpoch() const { return batches_per_epoch_; }

  std::vector<int64_t> NextBatch() {
    if (indices_epoch_ != epoch_) {
      const std::vector<int64_t> perm = BatchSampler::EpochPermutation(n_, seed_, epoch_, shuffle_);
      shard_indices_.resize(static_cast<size_t>(shard_size_));
      for (int64_t k = 0; k < shard_size_; ++k) shard_indices_[k] = perm[shard_ + k * shards_];
      indices_epoch_ = epoch_;
    }
    const int64_t start = batch_in_epoch_ * batch_;
    const int64_t len = std::min(batch_, shard_size_ - start);
    std::vector<int64_t> out(shard_indices_.begin() + start, shard_indices_.begin() + start + len);
    if (++batch_in_epoch_ == batches_per_epoch_) {
      ++epoch_;
      batch_in_epoch_ = 0;
    }
    return out;
  }

 private:
  int64_t n_, batch_;
  uint64_t seed_;
  int shard_, shards_;
  bool shuffle_;
  int64_t shard_size_ = 0, batches_per_epoch_ = 0;
  int64_t epoch_ = 0, batch_in_epoch_ = 0, indices_epoch_ = -1;
  std::vector<int64_t> shard_indices_;
};

struct Shape {
  int64_t n, batch;
  int shards;
};

// For a fixed world the cursor reproduces the stride sharding batch for
// batch whenever every shard had the same number of batches per epoch (the
// case a synchronous trainer could run). Where the old shards' counts
// differed (N - c < n at the epoch's last step), the short ranks now get an
// explicit empty batch instead of starting their next epoch a step early,
// and each epoch's non-empty batches are still exactly the old ones; with
// drop_last every rank stops after the smallest shard's full batches.
TEST(BatchSamplerTest, FixedWorldMatchesStrideSharding) {
  const Shape shapes[] = {
      {10, 2, 3},  // N % n != 0, partial last batches, equal batch counts
      {10, 4, 3},  // N % n != 0, a single partial step
      {12, 5, 2},  // N % n == 0, partial last batch
      {7, 3, 1},   // one rank
      {103, 10, 3}, {1001, 32, 4}, {100, 7, 6},
      {5, 2, 4},    {10, 3, 3},  // last step: R = 1 < n, ranks 1 and 2 get an empty batch
      {6, 1, 4},                 // last step: R = 2 < n
      {50, 4, 7},                // last step: R = 50 - 28 = 22 >= n, uneven partial batches
      {64, 4, 8},                // divides exactly
  };
  int uniform_shapes = 0, uneven_shapes = 0;
  for (const Shape& sh : shapes) {
    for (bool shuffle : {true, false}) {
      for (bool drop_last : {false, true}) {
        if (drop_last && sh.n / sh.shards < sh.batch) continue;  // Create refuses it
        std::vector<StrideReference> refs;
        for (int i = 0; i < sh.shards; ++i) {
          refs.emplace_back(sh.n, sh.batch, 5, i, sh.shards, shuffle, drop_last);
        }
        bool uniform = true;
        for (const StrideReference& r : refs) {
          uniform = uniform && r.BatchesPerEpoch() == refs[0].BatchesPerEpoch();
        }
        (uniform ? uniform_shapes : uneven_shapes)++;
        for (int i = 0; i < sh.shards; ++i) {
          SCOPED_TRACE(testing::Message()
                       << "N=" << sh.n << " B=" << sh.batch << " n=" << sh.shards << " rank " << i
                       << " shuffle=" << shuffle << " drop_last=" << drop_last);
          BatchSampler s = MustCreate(sh.n, sh.batch, 5, i, sh.shards, shuffle, drop_last);
          StrideReference& ref = refs[static_cast<size_t>(i)];
          const int64_t bpe = s.BatchesPerEpoch();
          if (uniform) {
            EXPECT_EQ(bpe, ref.BatchesPerEpoch());
          }
          for (int epoch = 0; epoch < 3; ++epoch) {
            std::vector<std::vector<int64_t>> mine, theirs;
            for (int64_t b = 0; b < bpe; ++b) {
              EXPECT_EQ(s.epoch(), epoch);
              EXPECT_EQ(s.batch_in_epoch(), b);
              EXPECT_EQ(s.cursor(), b * sh.batch * sh.shards);
              std::vector<int64_t> batch = Vec(s.NextBatch());
              if (uniform) {
                ASSERT_FALSE(batch.empty());
              } else if (batch.empty()) {
                // Only ever the epoch's last step, and only for ranks >= R.
                EXPECT_EQ(b, bpe - 1);
                EXPECT_GE(i, sh.n - b * sh.batch * sh.shards);
                continue;
              }
              mine.push_back(std::move(batch));
            }
            for (int64_t b = 0; b < ref.BatchesPerEpoch(); ++b) theirs.push_back(ref.NextBatch());
            if (drop_last) theirs.resize(std::min(theirs.size(), mine.size()));
            ASSERT_EQ(mine, theirs) << "epoch " << epoch;
          }
        }
      }
    }
  }
  EXPECT_GT(uniform_shapes, 0);
  EXPECT_GT(uneven_shapes, 0);
}

TEST(BatchSamplerTest, LastStepGivesShortRanksAnEmptyBatch) {
  // N = 10, B = 3, n = 3: step 1 takes positions 0..8, step 2 has R = 1 left.
  std::vector<BatchSampler> world;
  for (int i = 0; i < 3; ++i) world.push_back(MustCreate(10, 3, 1, i, 3, /*shuffle=*/false));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(world[i].BatchesPerEpoch(), 2);
    EXPECT_EQ(world[i].NextBatch().size(), 3u);
    EXPECT_EQ(world[i].cursor(), 9);
  }
  EXPECT_THAT(Vec(world[0].NextBatch()), ElementsAre(9));
  EXPECT_TRUE(world[1].NextBatch().empty());
  EXPECT_TRUE(world[2].NextBatch().empty());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(world[i].epoch(), 1);
    EXPECT_EQ(world[i].cursor(), 0);
  }
  EXPECT_THAT(Vec(world[1].NextBatch()), ElementsAre(1, 4, 7));
}

// One job's ranks over a schedule of world sizes: ranks that stay Reshard,
// ranks that join are created and SetCursor to the world's position, ranks
// that leave drop out. Returns, per completed epoch, every sample the world
// took in it.
std::map<int64_t, std::vector<int64_t>> RunWorld(int64_t n, int64_t batch, bool drop_last,
                                                 const std::vector<std::pair<int, int>>& schedule,
                                                 int64_t* epoch_end_steps = nullptr) {
  std::map<int64_t, std::vector<int64_t>> taken;
  std::vector<BatchSampler> world;
  int64_t step = 0;
  for (const auto& [size, steps] : schedule) {
    const int64_t epoch = world.empty() ? 0 : world[0].epoch();
    const int64_t cursor = world.empty() ? 0 : world[0].cursor();
    if (static_cast<int>(world.size()) > size) world.erase(world.begin() + size, world.end());
    for (int i = 0; i < static_cast<int>(world.size()); ++i) {
      EXPECT_TRUE(world[i].Reshard(i, size).ok());
    }
    for (int i = static_cast<int>(world.size()); i < size; ++i) {
      world.push_back(MustCreate(n, batch, 99, i, size, /*shuffle=*/true, drop_last));
      EXPECT_TRUE(world.back().SetCursor(epoch, cursor).ok());
    }
    for (int k = 0; k < steps; ++k, ++step) {
      const int64_t e = world[0].epoch();
      const int64_t c = world[0].cursor();
      for (BatchSampler& s : world) {
        EXPECT_EQ(s.epoch(), e);
        EXPECT_EQ(s.cursor(), c);
        std::span<const int64_t> b = s.NextBatch();
        taken[e].insert(taken[e].end(), b.begin(), b.end());
      }
      if (world[0].epoch() != e && epoch_end_steps != nullptr) *epoch_end_steps = step + 1;
    }
  }
  // The epoch in progress is not complete.
  taken.erase(world[0].epoch());
  return taken;
}

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

TEST(BatchSamplerTest, WorldChangesMidEpochLoseOrDoubleNothing) {
  // N = 100, B = 4: 3 ranks take 60 positions in 5 steps, 4 ranks 32 in 2
  // (cursor 92), 2 ranks the last 8 in 1 step; epoch 1 then has 2 ranks,
  // then 5 (a step of 20 from an odd cursor), then 1.
  int64_t end_step = -1;
  std::map<int64_t, std::vector<int64_t>> taken =
      RunWorld(100, 4, false, {{3, 5}, {4, 2}, {2, 1}, {2, 3}, {5, 2}, {1, 100}}, &end_step);
  ASSERT_GE(taken.size(), 2u);
  for (auto& [epoch, samples] : taken) {
    std::sort(samples.begin(), samples.end());
    EXPECT_EQ(samples, Iota(100)) << "epoch " << epoch;
  }
  // Epoch 0 ended exactly with the 2-rank step.
  std::map<int64_t, std::vector<int64_t>> first = RunWorld(100, 4, false, {{3, 5}, {4, 2}, {2, 1}});
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].size(), 100u);

  // A world larger than what is left: N = 50, B = 2; at cursor 46 six ranks
  // share R = 4 positions, ranks 4 and 5 get empty batches.
  taken = RunWorld(50, 2, false, {{3, 5}, {4, 2}, {6, 1}, {3, 30}});
  ASSERT_GE(taken.size(), 2u);
  for (auto& [epoch, samples] : taken) {
    std::sort(samples.begin(), samples.end());
    EXPECT_EQ(samples, Iota(50)) << "epoch " << epoch;
  }
}

TEST(BatchSamplerTest, WorldChangeAtEpochBoundaryLosesOrDoublesNothing) {
  // N = 60, B = 4: 3 ranks consume epoch 0 in exactly 5 steps; then 4 ranks
  // (4 steps, the last partial) and 2 ranks.
  int64_t end_step = -1;
  std::map<int64_t, std::vector<int64_t>> taken =
      RunWorld(60, 4, false, {{3, 5}, {4, 4}, {2, 8}, {3, 20}}, &end_step);
  ASSERT_GE(taken.size(), 3u);
  for (auto& [epoch, samples] : taken) {
    std::sort(samples.begin(), samples.end());
    EXPECT_EQ(samples, Iota(60)) << "epoch " << epoch;
  }
  // Epoch 0 ended with step 5, epoch 1 with step 9 (4 ranks), epoch 2 with
  // 2 ranks at step 17 (8 steps of 8 would be 64 > 60: the 8th is partial).
  std::map<int64_t, std::vector<int64_t>> e0 = RunWorld(60, 4, false, {{3, 5}}, &end_step);
  EXPECT_EQ(end_step, 5);
  EXPECT_EQ(e0.size(), 1u);
  RunWorld(60, 4, false, {{3, 5}, {4, 4}}, &end_step);
  EXPECT_EQ(end_step, 9);
  RunWorld(60, 4, false, {{3, 5}, {4, 4}, {2, 8}}, &end_step);
  EXPECT_EQ(end_step, 17);
}

TEST(BatchSamplerTest, WorldChangesWithDropLastTakeAtMostOnce) {
  // With drop_last an epoch ends when a full step no longer fits, so the
  // world takes a prefix of each epoch's permutation, each sample once.
  std::map<int64_t, std::vector<int64_t>> taken =
      RunWorld(100, 4, true, {{3, 5}, {4, 2}, {2, 1}, {5, 3}, {1, 40}});
  ASSERT_GE(taken.size(), 2u);
  for (auto& [epoch, samples] : taken) {
    const std::vector<int64_t> perm = BatchSampler::EpochPermutation(100, 99, epoch, true);
    std::vector<int64_t> prefix(perm.begin(), perm.begin() + static_cast<int64_t>(samples.size()));
    std::sort(samples.begin(), samples.end());
    std::sort(prefix.begin(), prefix.end());
    EXPECT_EQ(samples, prefix) << "epoch " << epoch;
  }
  // Epoch 0: 60 + 32 positions; the 8 left are less than the 4-rank world's
  // step of 16, so the epoch ended there, before the world shrank to 2.
  EXPECT_EQ(taken[0].size(), 92u);
}

TEST(BatchSamplerTest, ReshardToSameWorldIsNoOp) {
  for (bool drop_last : {false, true}) {
    BatchSampler a = MustCreate(103, 10, 7, 1, 3, true, drop_last);
    for (int i = 0; i < 5; ++i) a.NextBatch();
    BatchSampler b = a;
    ASSERT_TRUE(b.Reshard(1, 3).ok());
    EXPECT_EQ(b.epoch(), a.epoch());
    EXPECT_EQ(b.cursor(), a.cursor());
    EXPECT_EQ(b.shard_index(), 1);
    EXPECT_EQ(b.num_shards(), 3);
    EXPECT_EQ(b.BatchesPerEpoch(), a.BatchesPerEpoch());
    for (int i = 0; i < 12; ++i) ASSERT_EQ(Vec(a.NextBatch()), Vec(b.NextBatch())) << i;
  }
}

TEST(BatchSamplerTest, ReshardKeepsPositionAndChangesWhoTakesWhat) {
  BatchSampler s = MustCreate(20, 2, 0, 0, 2, /*shuffle=*/false);
  EXPECT_THAT(Vec(s.NextBatch()), ElementsAre(0, 2));  // cursor 4
  ASSERT_TRUE(s.Reshard(2, 3).ok());
  EXPECT_EQ(s.epoch(), 0);
  EXPECT_EQ(s.cursor(), 4);
  EXPECT_EQ(s.BatchesPerEpoch(), 4);  // ceil(20 / 6) for a fixed world of 3
  EXPECT_EQ(s.ShardSize(), 6);        // 2, 5, 8, 11, 14, 17
  EXPECT_THAT(Vec(s.NextBatch()), ElementsAre(6, 9));
  EXPECT_EQ(s.cursor(), 10);
}

TEST(BatchSamplerTest, SetCursorRoundTrip) {
  BatchSampler full = MustCreate(103, 10, 1234, 2, 3);
  std::vector<std::pair<int64_t, int64_t>> positions;
  std::vector<std::vector<int64_t>> batches;
  for (int i = 0; i < 15; ++i) {
    positions.emplace_back(full.epoch(), full.cursor());
    batches.push_back(Vec(full.NextBatch()));
  }
  for (size_t start = 0; start < positions.size(); ++start) {
    BatchSampler s = MustCreate(103, 10, 1234, 2, 3);
    ASSERT_TRUE(s.SetCursor(positions[start].first, positions[start].second).ok());
    EXPECT_EQ(s.epoch(), positions[start].first);
    EXPECT_EQ(s.cursor(), positions[start].second);
    for (size_t i = start; i < batches.size(); ++i) {
      ASSERT_EQ(Vec(s.NextBatch()), batches[i]) << "start " << start;
    }
  }
  // SetPosition is SetCursor at batch * B * n, carrying into later epochs.
  BatchSampler s = MustCreate(103, 10, 1234, 2, 3);
  s.SetPosition(1, 6);  // 4 batches per epoch: epoch 2, batch 2
  EXPECT_EQ(s.epoch(), 2);
  EXPECT_EQ(s.cursor(), 60);
  // A consumed epoch moves on; so does, with drop_last, a short remainder.
  ASSERT_TRUE(s.SetCursor(4, 103).ok());
  EXPECT_EQ(s.epoch(), 5);
  EXPECT_EQ(s.cursor(), 0);
  BatchSampler d = MustCreate(103, 10, 1234, 2, 3, true, /*drop_last=*/true);
  ASSERT_TRUE(d.SetCursor(0, 80).ok());  // 23 left < one step of 30
  EXPECT_EQ(d.epoch(), 1);
  EXPECT_EQ(d.cursor(), 0);
  ASSERT_TRUE(d.SetCursor(0, 73).ok());  // exactly one step left
  EXPECT_EQ(d.epoch(), 0);
  EXPECT_EQ(d.cursor(), 73);
  EXPECT_EQ(d.NextBatch().size(), 10u);
  EXPECT_EQ(d.epoch(), 1);
}

TEST(BatchSamplerTest, InvalidReshardAndCursor) {
  BatchSampler s = MustCreate(10, 2, 0, 1, 3);
  s.NextBatch();
  auto code = [](const absl::Status& st) { return st.code(); };
  EXPECT_EQ(code(s.Reshard(-1, 3)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(s.Reshard(3, 3)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(s.Reshard(0, 0)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(s.Reshard(0, -2)), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.Reshard(0, 11).message()), HasSubstr("is empty"));
  EXPECT_EQ(code(s.SetCursor(-1, 0)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(s.SetCursor(0, -1)), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.SetCursor(0, 11).message()), HasSubstr("cursor 11 is outside [0, 10]"));
  // Refused calls change nothing.
  EXPECT_EQ(s.shard_index(), 1);
  EXPECT_EQ(s.num_shards(), 3);
  EXPECT_EQ(s.epoch(), 0);
  EXPECT_EQ(s.cursor(), 6);
  BatchSampler untouched = MustCreate(10, 2, 0, 1, 3);
  untouched.NextBatch();
  EXPECT_EQ(Vec(s.NextBatch()), Vec(untouched.NextBatch()));

  BatchSampler d = MustCreate(12, 2, 0, 0, 2, true, /*drop_last=*/true);
  EXPECT_THAT(std::string(d.Reshard(0, 7).message()), HasSubstr("drop_last with batch_size 2"));
  EXPECT_EQ(d.num_shards(), 2);

  BatchSampler bad(10, 0, 0, 0, 1, true, false);
  EXPECT_EQ(code(bad.SetCursor(0, 0)), absl::StatusCode::kFailedPrecondition);
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
