#include "runtime/data/batch_sampler.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kubetrain::data {
namespace {

// splitmix64 (Steele, Lea, Flood 2014): tiny, fast, and identical on every
// platform, unlike std::shuffle / std::uniform_int_distribution.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}

  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, n), n > 0, without modulo bias (Lemire 2019).
  uint64_t Below(uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(Next()) * n;
    auto low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(Next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  uint64_t state_;
};

uint64_t Mix(uint64_t x) { return SplitMix64(x).Next(); }

int64_t ShardSizeOf(int64_t dataset_size, int shard_index, int num_shards) {
  return dataset_size / num_shards + (shard_index < dataset_size % num_shards ? 1 : 0);
}

absl::Status Validate(int64_t dataset_size, int64_t batch_size, int shard_index, int num_shards,
                      bool drop_last) {
  if (dataset_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchSampler: dataset_size must be > 0, got ", dataset_size));
  }
  if (batch_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchSampler: batch_size must be > 0, got ", batch_size));
  }
  if (num_shards <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchSampler: num_shards must be > 0, got ", num_shards));
  }
  if (shard_index < 0 || shard_index >= num_shards) {
    return absl::InvalidArgumentError(absl::StrCat("BatchSampler: shard_index ", shard_index,
                                                   " is outside [0, ", num_shards, ")"));
  }
  const int64_t shard_size = ShardSizeOf(dataset_size, shard_index, num_shards);
  if (shard_size == 0) {
    return absl::InvalidArgumentError(absl::StrCat("BatchSampler: shard ", shard_index, " of ",
                                                   num_shards, " is empty: the dataset has only ",
                                                   dataset_size, " samples"));
  }
  if (drop_last && shard_size < batch_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "BatchSampler: drop_last with batch_size ", batch_size, " > shard size ", shard_size,
        " (shard ", shard_index, " of ", num_shards, ") would yield no batches"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BatchSampler> BatchSampler::Create(int64_t dataset_size, int64_t batch_size,
                                                  uint64_t seed, int shard_index, int num_shards,
                                                  bool shuffle, bool drop_last) {
  if (absl::Status s = Validate(dataset_size, batch_size, shard_index, num_shards, drop_last);
      !s.ok()) {
    return s;
  }
  return BatchSampler(dataset_size, batch_size, seed, shard_index, num_shards, shuffle, drop_last);
}

BatchSampler::BatchSampler(int64_t dataset_size, int64_t batch_size, uint64_t seed, int shard_index,
                           int num_shards, bool shuffle, bool drop_last)
    : dataset_size_(dataset_size),
      batch_size_(batch_size),
      seed_(seed),
      shard_index_(shard_index),
      num_shards_(num_shards),
      shuffle_(shuffle),
      drop_last_(drop_last) {
  if (!Validate(dataset_size, batch_size, shard_index, num_shards, drop_last).ok()) return;
  shard_size_ = ShardSizeOf(dataset_size, shard_index, num_shards);
  batches_per_epoch_ =
      drop_last_ ? shard_size_ / batch_size_ : (shard_size_ + batch_size_ - 1) / batch_size_;
}

std::vector<int64_t> BatchSampler::EpochPermutation(int64_t dataset_size, uint64_t seed,
                                                    int64_t epoch, bool shuffle) {
  std::vector<int64_t> perm(static_cast<size_t>(std::max<int64_t>(dataset_size, 0)));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  if (!shuffle) return perm;
  SplitMix64 rng(Mix(seed) ^ Mix(static_cast<uint64_t>(epoch) ^ 0xD1B54A32D192ED03ULL));
  for (size_t i = perm.size(); i > 1; --i) {
    const auto j = static_cast<size_t>(rng.Below(i));
    std::swap(perm[i - 1], perm[j]);
  }
  return perm;
}

void BatchSampler::EnsureEpoch() {
  if (indices_epoch_ == epoch_) return;
  shard_indices_.resize(static_cast<size_t>(shard_size_));
  if (shuffle_) {
    const std::vector<int64_t> perm = EpochPermutation(dataset_size_, seed_, epoch_, true);
    for (int64_t k = 0; k < shard_size_; ++k) {
      shard_indices_[k] = perm[shard_index_ + k * num_shards_];
    }
  } else {
    for (int64_t k = 0; k < shard_size_; ++k) shard_indices_[k] = shard_index_ + k * num_shards_;
  }
  indices_epoch_ = epoch_;
}

std::span<const int64_t> BatchSampler::NextBatch() {
  if (batches_per_epoch_ == 0) return {};
  EnsureEpoch();
  const int64_t start = batch_in_epoch_ * batch_size_;
  const int64_t len = std::min(batch_size_, shard_size_ - start);
  std::span<const int64_t> batch(shard_indices_.data() + start, static_cast<size_t>(len));
  if (++batch_in_epoch_ == batches_per_epoch_) {
    ++epoch_;
    batch_in_epoch_ = 0;
  }
  return batch;
}

void BatchSampler::SetPosition(int64_t epoch, int64_t batch_in_epoch) {
  if (batches_per_epoch_ == 0) return;
  epoch = std::max<int64_t>(epoch, 0);
  batch_in_epoch = std::max<int64_t>(batch_in_epoch, 0);
  epoch_ = epoch + batch_in_epoch / batches_per_epoch_;
  batch_in_epoch_ = batch_in_epoch % batches_per_epoch_;
}

void GatherBatch(const Dataset& ds, std::span<const int64_t> indices, float* features_out,
                 int32_t* labels_out) {
  const int64_t sample_size = ds.SampleSize();
  for (size_t k = 0; k < indices.size(); ++k) {
    const int64_t i = indices[k];
    if (features_out != nullptr && sample_size > 0) {
      std::memcpy(features_out + static_cast<int64_t>(k) * sample_size,
                  ds.features.data() + i * sample_size,
                  static_cast<size_t>(sample_size) * sizeof(float));
    }
    if (labels_out != nullptr) labels_out[k] = ds.labels[static_cast<size_t>(i)];
  }
}

}  // namespace kubetrain::data
