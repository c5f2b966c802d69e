#include "runtime/exchange/allreduce/bucket_plan.h"

#include <algorithm>

namespace kubetrain::allreduce {

BucketPlan::BucketPlan(int64_t num_elements, int64_t bucket_elements) {
  bucket_elements = std::max<int64_t>(bucket_elements, 1);
  for (int64_t end = num_elements; end > 0; end -= bucket_elements) {
    const int64_t begin = std::max<int64_t>(0, end - bucket_elements);
    buckets_.push_back({begin, end - begin});
  }
}

int BucketPlan::ReadyCount(int64_t ready_from) const {
  int n = 0;
  while (n < static_cast<int>(buckets_.size()) &&
         buckets_[static_cast<size_t>(n)].offset >= ready_from) {
    ++n;
  }
  return n;
}

}  // namespace kubetrain::allreduce
