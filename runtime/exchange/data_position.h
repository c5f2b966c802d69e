// DataPosition: where a job is in its data order, BatchSampler's epoch()
// and cursor() (runtime/data/batch_sampler.h: how many of the epoch's
// permutation positions the whole world has taken), the same on every rank.
// Checkpoints record it (checkpoint.h) and a re-formed allreduce world hands
// it to its newcomers with the state (exchange.h).
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_DATA_POSITION_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_DATA_POSITION_H_

#include <cstdint>

namespace kubetrain::exchange {

struct DataPosition {
  int64_t epoch = 0;
  int64_t cursor = 0;
  bool operator==(const DataPosition&) const = default;
};

}  // namespace kubetrain::exchange

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_DATA_POSITION_H_
