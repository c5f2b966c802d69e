#include "runtime/exchange/ps/shard_range.h"

#include <algorithm>

namespace kubetrain::ps {

Range ShardRange(int64_t num_params, int num_shards, int index) {
  constexpr int64_t kAlign = 16;
  const int64_t blocks = (num_params + kAlign - 1) / kAlign;
  const int64_t per = blocks / num_shards, extra = blocks % num_shards;
  const int64_t first = index * per + std::min<int64_t>(index, extra);
  const int64_t count = per + (index < extra ? 1 : 0);
  Range r;
  r.offset = std::min(first * kAlign, num_params);
  r.length = std::min((first + count) * kAlign, num_params) - r.offset;
  return r;
}

}  // namespace kubetrain::ps
