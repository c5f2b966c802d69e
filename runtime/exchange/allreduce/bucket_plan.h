// BucketPlan: how the flat gradient buffer is cut into allreduce buckets.
// Backward fills the buffer from its end (the last layer's parameters are
// declared last), so bucket 0 is the buffer's tail and bucket k+1 lies just
// before bucket k: a bucket is complete as soon as backward has reached its
// first element. Buckets are contiguous, so fusing tensors costs nothing.
// Immutable; thread-safe.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_BUCKET_PLAN_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_BUCKET_PLAN_H_

#include <cstdint>
#include <vector>

namespace kubetrain::allreduce {

struct Bucket {
  int64_t offset = 0;  // first element
  int64_t length = 0;
};

class BucketPlan {
 public:
  // `bucket_elements` >= 1; a buffer of 0 elements has no buckets.
  BucketPlan(int64_t num_elements, int64_t bucket_elements);

  const std::vector<Bucket>& buckets() const { return buckets_; }
  // Buckets [0, result) are complete once every element at index >=
  // `ready_from` is final.
  int ReadyCount(int64_t ready_from) const;

 private:
  std::vector<Bucket> buckets_;
};

}  // namespace kubetrain::allreduce

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_BUCKET_PLAN_H_
