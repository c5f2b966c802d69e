// How the flat parameter vector is split between parameter-server shards:
// contiguous, near-equal ranges whose boundaries fall on 16 elements (64
// bytes). Workers and servers compute the same split independently.
// Pure functions; thread-safe.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_SHARD_RANGE_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_SHARD_RANGE_H_

#include <cstdint>

namespace kubetrain::ps {

struct Range {
  int64_t offset = 0;
  int64_t length = 0;
  int64_t end() const { return offset + length; }
  bool operator==(const Range&) const = default;
};

// Range of shard `index` of `num_shards` over `num_params` elements.
Range ShardRange(int64_t num_params, int num_shards, int index);

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_SHARD_RANGE_H_
