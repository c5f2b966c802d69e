// In-memory labelled dataset: dense float features, one int label per sample.
// Not thread-safe for writes; const access may be shared between threads.
#ifndef KUBETRAIN_RUNTIME_DATA_DATASET_H_
#define KUBETRAIN_RUNTIME_DATA_DATASET_H_

#include <cstdint>
#include <span>
#include <vector>

namespace kubetrain::data {

struct Dataset {
  // Shape of one sample, e.g. {28, 28, 1} (height, width, channels) for
  // images or {d} for tabular rows.
  std::vector<int64_t> sample_shape;
  // size() * SampleSize() floats, sample-major.
  std::vector<float> features;
  std::vector<int32_t> labels;
  // Number of classes: max label + 1 unless the source says otherwise.
  int num_classes = 0;

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  int64_t SampleSize() const {
    int64_t n = 1;
    for (int64_t d : sample_shape) n *= d;
    return n;
  }
  std::span<const float> Sample(int64_t i) const {
    return {features.data() + i * SampleSize(), static_cast<size_t>(SampleSize())};
  }
};

}  // namespace kubetrain::data

#endif  // KUBETRAIN_RUNTIME_DATA_DATASET_H_
