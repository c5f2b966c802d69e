// BatchSampler: deterministic, shardable mini-batch index generator.
//
// Each epoch e has one permutation of [0, dataset_size) computed from
// (seed, e) with a PRNG implemented here (splitmix64 + Fisher-Yates with
// unbiased bounded draws), so every worker, compiler and standard library
// agrees on it; without shuffle it is the identity. Shard i of n takes the
// permutation positions p with p % n == i, in order: the shards of one epoch
// are disjoint, together cover every sample exactly once, and their sizes
// differ by at most one. A shard's samples are cut into batches of
// batch_size; the last one may be partial unless drop_last. Because shard
// sizes can differ by one, BatchesPerEpoch() can differ by one between shards
// when dataset_size % num_shards != 0; synchronous trainers should pick sizes
// where it does not (or stop each epoch at the minimum over shards).
//
// Not thread-safe: use one sampler per thread (they are cheap to copy).
#ifndef KUBETRAIN_RUNTIME_DATA_BATCH_SAMPLER_H_
#define KUBETRAIN_RUNTIME_DATA_BATCH_SAMPLER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/data/dataset.h"

namespace kubetrain::data {

class BatchSampler {
 public:
  // Validates the arguments: dataset_size > 0, batch_size > 0,
  // 0 <= shard_index < num_shards, the shard has at least one sample, and
  // with drop_last at least one full batch per epoch. InvalidArgument
  // otherwise.
  static absl::StatusOr<BatchSampler> Create(int64_t dataset_size, int64_t batch_size,
                                             uint64_t seed, int shard_index, int num_shards,
                                             bool shuffle, bool drop_last);

  // Prefer Create. The arguments must pass Create's checks; if they do not,
  // the sampler is empty (BatchesPerEpoch() == 0, NextBatch() returns {}).
  BatchSampler(int64_t dataset_size, int64_t batch_size, uint64_t seed, int shard_index,
               int num_shards, bool shuffle, bool drop_last);

  // Epoch and batch (0-based) of the batch the next NextBatch() returns.
  // batch_in_epoch() is always < BatchesPerEpoch().
  int64_t epoch() const { return epoch_; }
  int64_t batch_in_epoch() const { return batch_in_epoch_; }

  // Batches this shard yields per epoch.
  int64_t BatchesPerEpoch() const { return batches_per_epoch_; }
  // Samples of each epoch in this shard (including those drop_last drops).
  int64_t ShardSize() const { return shard_size_; }

  int64_t dataset_size() const { return dataset_size_; }
  int64_t batch_size() const { return batch_size_; }
  int shard_index() const { return shard_index_; }
  int num_shards() const { return num_shards_; }

  // Indices (into the dataset) of the next batch, then advances, moving to
  // the next epoch after the last batch. The span stays valid until the next
  // call to NextBatch or SetPosition, or until the sampler is moved/destroyed.
  std::span<const int64_t> NextBatch();

  // Makes the next NextBatch() return batch `batch_in_epoch` of `epoch`, as an
  // uninterrupted run would. A batch_in_epoch >= BatchesPerEpoch() carries into
  // later epochs, so SetPosition(0, global_step) also works; negative values
  // are treated as 0.
  void SetPosition(int64_t epoch, int64_t batch_in_epoch);

  // The permutation of [0, dataset_size) used in `epoch` (identity without
  // shuffle). Exposed for tests and tools.
  static std::vector<int64_t> EpochPermutation(int64_t dataset_size, uint64_t seed, int64_t epoch,
                                               bool shuffle);

 private:
  // Recomputes shard_indices_ for epoch_ if they are for another epoch.
  void EnsureEpoch();

  int64_t dataset_size_;
  int64_t batch_size_;
  uint64_t seed_;
  int shard_index_;
  int num_shards_;
  bool shuffle_;
  bool drop_last_;

  int64_t shard_size_ = 0;
  int64_t batches_per_epoch_ = 0;
  int64_t epoch_ = 0;
  int64_t batch_in_epoch_ = 0;
  int64_t indices_epoch_ = -1;  // Epoch shard_indices_ holds; -1: none yet.
  std::vector<int64_t> shard_indices_;
};

// Copies samples `indices` of `ds` contiguously: features_out receives
// indices.size() * ds.SampleSize() floats, labels_out indices.size() labels.
// Either output may be null to skip it. Every index must be in [0, ds.size()).
void GatherBatch(const Dataset& ds, std::span<const int64_t> indices, float* features_out,
                 int32_t* labels_out);

}  // namespace kubetrain::data

#endif  // KUBETRAIN_RUNTIME_DATA_BATCH_SAMPLER_H_
