// Weight initialisers. Stateless functions; thread-safe given distinct rngs.
#ifndef KUBETRAIN_RUNTIME_NN_INIT_H_
#define KUBETRAIN_RUNTIME_NN_INIT_H_

#include <random>

#include "runtime/tensor/tensor_view.h"

namespace kubetrain::nn {

// He/Kaiming uniform: U(-b, b), b = sqrt(6 / fan_in); suits ReLU networks.
void HeUniform(const TensorView& w, int64_t fan_in, std::mt19937_64& rng);

void Fill(const TensorView& t, float value);

}  // namespace kubetrain::nn

#endif  // KUBETRAIN_RUNTIME_NN_INIT_H_
