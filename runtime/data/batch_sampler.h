// BatchSampler: deterministic, shardable mini-batch index generator with a
// world-wide position, so that the world (the number of ranks drawing from
// one data order) may change between steps.
//
// Each epoch e has one permutation of [0, N) (N = dataset_size) computed from
// (seed, e) with a PRNG implemented here (splitmix64 + Fisher-Yates with
// unbiased bounded draws), so every worker, compiler and standard library
// agrees on it; without shuffle it is the identity.
//
// Position. The sampler's position is (epoch, cursor): cursor is the number
// of the epoch's permutation positions the whole world has consumed, in
// [0, N). It is the same on every rank, so it is what a checkpoint or a
// re-formed world carries. A step of a world of n ranks with batch size B at
// cursor c gives rank i the permutation positions
//   c + i + j*n  for j = 0 .. B-1, those < N,
// in that order, and moves the cursor to min(c + B*n, N); the epoch ends when
// the cursor reaches N, and the next batch is then epoch e+1 at cursor 0.
// The ranks' batches of one step are disjoint, and the steps of one epoch
// cover every position exactly once, however the world changes between
// steps (Reshard). For a world that does not change, rank i takes the
// positions p with p % n == i, batch for batch as the per-shard stride
// sharding this class did before the cursor (each shard cut its own
// positions into batches) whenever those shards had the same number of
// batches per epoch; the cases where they did not are described next.
//
// The epoch's last step. With R = N - c remaining positions, ranks i >= R
// get no position at all when R < n: NextBatch returns an EMPTY span for
// them (only ever at an epoch's last step). A synchronous trainer must still
// take part in that step (allreduce, barrier) with a zero gradient, or the
// world deadlocks; every rank takes the same number of steps per epoch.
// (Before the world-wide cursor, such a rank went on to its next epoch one
// step early, so ranks drifted apart by epoch, and with drop_last a rank
// whose shard had more full batches took them.) Otherwise a rank's batch at
// the last step may be partial (fewer than B samples, at least one) unless
// drop_last.
//
// drop_last: a step is taken only when every rank gets a full batch
// (N - c >= B*n); otherwise the rest of the epoch is dropped, on every rank
// alike, and the next batch is epoch e+1 at cursor 0. Batches are then never
// empty or partial.
//
// Not thread-safe: use one sampler per thread. Copies are cheap (the
// epoch's permutation is shared, immutable, between copies).
#ifndef KUBETRAIN_RUNTIME_DATA_BATCH_SAMPLER_H_
#define KUBETRAIN_RUNTIME_DATA_BATCH_SAMPLER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/data/dataset.h"

namespace kubetrain::data {

class BatchSampler {
 public:
  // Validates the arguments: dataset_size > 0, batch_size > 0,
  // num_shards > 0, 0 <= shard_index < num_shards, dataset_size >=
  // num_shards (every rank has a sample each epoch), and with drop_last
  // dataset_size >= batch_size * num_shards (at least one step per epoch).
  // InvalidArgument otherwise. The position is epoch 0, cursor 0.
  static absl::StatusOr<BatchSampler> Create(int64_t dataset_size, int64_t batch_size,
                                             uint64_t seed, int shard_index, int num_shards,
                                             bool shuffle, bool drop_last);

  // Prefer Create. The arguments must pass Create's checks; if they do not,
  // the sampler is empty (BatchesPerEpoch() == 0, NextBatch() returns {}).
  BatchSampler(int64_t dataset_size, int64_t batch_size, uint64_t seed, int shard_index,
               int num_shards, bool shuffle, bool drop_last);

  // Where the next NextBatch() starts: its epoch, and the number of that
  // epoch's permutation positions the world consumed before it. Always
  // 0 <= cursor() < dataset_size(), and with drop_last there is a full
  // step's worth left (dataset_size() - cursor() >= batch_size() *
  // num_shards()): an ended epoch has already moved on to the next.
  int64_t epoch() const { return epoch_; }
  int64_t cursor() const { return cursor_; }

  // For a world that has not changed during the epoch: the batches this
  // rank has taken in it (cursor() / (batch_size() * num_shards())); after a
  // Reshard mid-epoch, the number of this world's full steps the cursor
  // lies past. Always < BatchesPerEpoch().
  int64_t batch_in_epoch() const;

  // The batches (NextBatch calls, empty ones included) this shard yields
  // per epoch if the world does not change: ceil(N / (B*n)), or
  // floor(N / (B*n)) with drop_last. The same on every rank.
  int64_t BatchesPerEpoch() const { return batches_per_epoch_; }
  // The samples of a whole epoch this shard takes if the world does not
  // change (including those drop_last drops): the positions p < N with
  // p % n == shard_index.
  int64_t ShardSize() const { return shard_size_; }

  int64_t dataset_size() const { return dataset_size_; }
  int64_t batch_size() const { return batch_size_; }
  int shard_index() const { return shard_index_; }
  int num_shards() const { return num_shards_; }

  // Indices (into the dataset) of this rank's batch of the world's next
  // step, then advances the cursor past the whole step (every rank's
  // batch), moving to the next epoch after its last step. The span is empty
  // when this rank has no sample in the epoch's last step (see the header
  // comment; the caller must still take part in the step), and on an empty
  // sampler. It stays valid until the next call to NextBatch, SetPosition,
  // SetCursor or Reshard, or until the sampler is moved/destroyed.
  std::span<const int64_t> NextBatch();

  // Fixed worlds: makes the next NextBatch() return batch `batch_in_epoch`
  // of `epoch`, as an uninterrupted run would (cursor = batch_in_epoch * B
  // * n). A batch_in_epoch >= BatchesPerEpoch() carries into later epochs,
  // so SetPosition(0, global_step) also works; negative values are treated
  // as 0. Nothing happens on an empty sampler.
  void SetPosition(int64_t epoch, int64_t batch_in_epoch);

  // Sets the world-wide position (a checkpoint's or a peer's). InvalidArgument
  // unless epoch >= 0 and 0 <= cursor <= dataset_size(); FailedPrecondition
  // on an empty sampler. A cursor of dataset_size() (the epoch is consumed),
  // or with drop_last one with less than a full step left, moves to the
  // next epoch at cursor 0, as NextBatch would have.
  absl::Status SetCursor(int64_t epoch, int64_t cursor);

  // The world changed (a rank joined or left at a step boundary): from the
  // next NextBatch on this sampler is rank `shard_index` of `num_shards`,
  // at the same (epoch, cursor), so the samples the old world had not
  // consumed are exactly the ones the new world shares out. Every rank of
  // the new world must reshard at the same position (a rank that joins
  // creates its sampler as shard_index of num_shards and calls SetCursor
  // with the world's epoch and cursor). Resharding to the
  // current world changes nothing. InvalidArgument, leaving the sampler
  // unchanged, when the new world fails Create's checks; with drop_last, a
  // larger world may have less than a full step left, which ends the epoch.
  absl::Status Reshard(int shard_index, int num_shards);

  // The permutation of [0, dataset_size) used in `epoch` (identity without
  // shuffle). Exposed for tests and tools.
  static std::vector<int64_t> EpochPermutation(int64_t dataset_size, uint64_t seed, int64_t epoch,
                                               bool shuffle);

 private:
  // Sets the fields derived from the world; false (the sampler becomes
  // empty) when the configuration fails Create's checks.
  bool Configure(int shard_index, int num_shards);
  // Moves a consumed epoch (cursor at its end, or with drop_last short of a
  // full step) on to the next epoch at cursor 0.
  void Normalize();
  // Makes perm_ hold epoch_'s permutation (shuffled samplers only).
  void EnsureEpoch();

  int64_t dataset_size_;
  int64_t batch_size_;
  uint64_t seed_;
  int shard_index_ = 0;
  int num_shards_ = 1;
  bool shuffle_;
  bool drop_last_;

  bool valid_ = false;
  int64_t shard_size_ = 0;
  int64_t batches_per_epoch_ = 0;
  int64_t epoch_ = 0;
  int64_t cursor_ = 0;
  int64_t perm_epoch_ = -1;                           // epoch perm_ holds; -1: none yet
  std::shared_ptr<const std::vector<int64_t>> perm_;  // shared between copies
  std::vector<int64_t> batch_;                        // the last NextBatch's indices
};

// Copies samples `indices` of `ds` contiguously: features_out receives
// indices.size() * ds.SampleSize() floats, labels_out indices.size() labels.
// Either output may be null to skip it. Every index must be in [0, ds.size()).
void GatherBatch(const Dataset& ds, std::span<const int64_t> indices, float* features_out,
                 int32_t* labels_out);

}  // namespace kubetrain::data

#endif  // KUBETRAIN_RUNTIME_DATA_BATCH_SAMPLER_H_
