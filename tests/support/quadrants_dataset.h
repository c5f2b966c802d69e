// A small learnable image dataset for training tests: 4 classes on
// side x side x channels images, where class c brightens quadrant c in
// channel c % channels, plus Gaussian noise (sd 0.3). Seeded; header-only.
#ifndef KUBETRAIN_TESTS_SUPPORT_QUADRANTS_DATASET_H_
#define KUBETRAIN_TESTS_SUPPORT_QUADRANTS_DATASET_H_

#include <cstdint>
#include <random>

#include "runtime/data/dataset.h"

namespace kubetrain::testing {

// `side` must be even; samples cycle through the classes 0, 1, 2, 3.
inline data::Dataset QuadrantsDataset(int n, uint64_t seed, int side, int channels) {
  data::Dataset ds;
  ds.sample_shape = {side, side, channels};
  ds.num_classes = 4;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise(0, 0.3f);
  const int half = side / 2;
  for (int i = 0; i < n; ++i) {
    const int c = i % 4;
    for (int h = 0; h < side; ++h) {
      for (int w = 0; w < side; ++w) {
        for (int ch = 0; ch < channels; ++ch) {
          const bool on = (h / half) * 2 + w / half == c && ch == c % channels;
          ds.features.push_back((on ? 1.0f : 0.0f) + noise(rng));
        }
      }
    }
    ds.labels.push_back(c);
  }
  return ds;
}

}  // namespace kubetrain::testing

#endif  // KUBETRAIN_TESTS_SUPPORT_QUADRANTS_DATASET_H_
