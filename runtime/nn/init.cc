#include "runtime/nn/init.h"

#include <algorithm>
#include <cmath>

namespace kubetrain::nn {

void HeUniform(const TensorView& w, int64_t fan_in, std::mt19937_64& rng) {
  const double bound = std::sqrt(6.0 / static_cast<double>(std::max<int64_t>(fan_in, 1)));
  // Portable: derive uniform doubles from raw 64-bit draws rather than
  // std::uniform_real_distribution, whose output differs between libraries.
  for (int64_t i = 0; i < w.size(); ++i) {
    double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1)
    w[i] = static_cast<float>((2.0 * u - 1.0) * bound);
  }
}

void Fill(const TensorView& t, float value) { std::fill_n(t.data(), t.size(), value); }

}  // namespace kubetrain::nn
