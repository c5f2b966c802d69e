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

// Positions p < dataset_size with p % num_shards == shard_index.
int64_t ShardSizeOf(int64_t dataset_size, int shard_index, int num_shards) {
  return dataset_size / num_shards + (shard_index < dataset_size % num_shards ? 1 : 0);
}

// Positions one step of the world consumes, B*n, or more than dataset_size
// when that is already more (the batch size capped at dataset_size keeps
// the product from overflowing; it changes nothing, since a step never goes
// past the epoch's end).
int64_t StepSpan(int64_t dataset_size, int64_t batch_size, int num_shards) {
  return std::min(batch_size, dataset_size) * num_shards;
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
  // The last shard is the smallest: every shard has a sample, and with
  // drop_last a full batch, iff it does.
  if (dataset_size < num_shards) {
    return absl::InvalidArgumentError(absl::StrCat("BatchSampler: shard ", num_shards - 1, " of ",
                                                   num_shards, " is empty: the dataset has only ",
                                                   dataset_size, " samples"));
  }
  if (drop_last && dataset_size / num_shards < batch_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchSampler: drop_last with batch_size ", batch_size, " > shard size ",
                     dataset_size / num_shards, " (shard ", num_shards - 1, " of ", num_shards,
                     ") would yield no batches"));
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
  valid_ = Configure(shard_index, num_shards);
}

bool BatchSampler::Configure(int shard_index, int num_shards) {
  if (!Validate(dataset_size_, batch_size_, shard_index, num_shards, drop_last_).ok()) {
    return false;
  }
  shard_index_ = shard_index;
  num_shards_ = num_shards;
  shard_size_ = ShardSizeOf(dataset_size_, shard_index, num_shards);
  const int64_t span = StepSpan(dataset_size_, batch_size_, num_shards);
  batches_per_epoch_ = drop_last_ ? dataset_size_ / span : (dataset_size_ + span - 1) / span;
  return true;
}

int64_t BatchSampler::batch_in_epoch() const {
  if (!valid_) return 0;
  return cursor_ / StepSpan(dataset_size_, batch_size_, num_shards_);
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
  if (perm_epoch_ == epoch_) return;
  // A new vector rather than an update in place: copies may share the old.
  perm_ = std::make_shared<const std::vector<int64_t>>(
      EpochPermutation(dataset_size_, seed_, epoch_, /*shuffle=*/true));
  perm_epoch_ = epoch_;
}

void BatchSampler::Normalize() {
  const int64_t left = dataset_size_ - cursor_;
  if (left <= 0 || (drop_last_ && left < StepSpan(dataset_size_, batch_size_, num_shards_))) {
    ++epoch_;
    cursor_ = 0;
  }
}

std::span<const int64_t> BatchSampler::NextBatch() {
  batch_.clear();
  if (!valid_) return {};
  if (shuffle_) EnsureEpoch();
  const int64_t n = num_shards_;
  for (int64_t j = 0, p = cursor_ + shard_index_; j < batch_size_ && p < dataset_size_;
       ++j, p += n) {
    batch_.push_back(shuffle_ ? (*perm_)[static_cast<size_t>(p)] : p);
  }
  cursor_ = std::min(cursor_ + StepSpan(dataset_size_, batch_size_, num_shards_), dataset_size_);
  Normalize();
  return batch_;
}

void BatchSampler::SetPosition(int64_t epoch, int64_t batch_in_epoch) {
  batch_.clear();
  if (!valid_) return;
  epoch = std::max<int64_t>(epoch, 0);
  batch_in_epoch = std::max<int64_t>(batch_in_epoch, 0);
  epoch_ = epoch + batch_in_epoch / batches_per_epoch_;
  // < dataset_size (and a full step short of it with drop_last), by the
  // definition of batches_per_epoch_.
  cursor_ = batch_in_epoch % batches_per_epoch_ * StepSpan(dataset_size_, batch_size_, num_shards_);
}

absl::Status BatchSampler::SetCursor(int64_t epoch, int64_t cursor) {
  if (!valid_) {
    return absl::FailedPreconditionError(
        "BatchSampler: SetCursor on an empty sampler (created with invalid arguments)");
  }
  if (epoch < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchSampler: epoch must be >= 0, got ", epoch));
  }
  if (cursor < 0 || cursor > dataset_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchSampler: cursor ", cursor, " is outside [0, ", dataset_size_, "]"));
  }
  batch_.clear();
  epoch_ = epoch;
  cursor_ = cursor;
  Normalize();
  return absl::OkStatus();
}

absl::Status BatchSampler::Reshard(int shard_index, int num_shards) {
  if (absl::Status s = Validate(dataset_size_, batch_size_, shard_index, num_shards, drop_last_);
      !s.ok()) {
    return s;
  }
  batch_.clear();
  valid_ = Configure(shard_index, num_shards);
  Normalize();
  return absl::OkStatus();
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
