// Buffers shared with unlocked readers, reused once the readers let go.
// A writer (under its owner's lock) holds the current buffer as a
// shared_ptr; readers take copies of that shared_ptr only under the same
// lock, and read the buffer after unlocking. Before writing, the owner asks
// the pool for a buffer no reader holds: the current one when it is free,
// else a free spare, else a new one. The pool grows to the most readers at
// once, plus one, and never shrinks.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_REUSE_POOL_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_REUSE_POOL_H_

#include <atomic>
#include <memory>
#include <utility>
#include <vector>

namespace kubetrain::ps {

template <typename T>
class ReusePool {
 public:
  // Requires the owner's lock. `current` must be null or a buffer of this
  // pool; `make` builds a new buffer. The result is free to write: new
  // holders are taken only under the lock, so a count that says "only the
  // pool (and `current`) hold it" stays so, and the acquire fence pairs with
  // the last reader's release of it, ordering that reader's reads before the
  // caller's writes.
  template <typename Make>
  std::shared_ptr<T> Writable(const std::shared_ptr<T>& current, Make&& make) {
    std::shared_ptr<T> out;
    if (current != nullptr && current.use_count() == 2) out = current;  // current + pool
    for (size_t i = 0; i < pool_.size() && out == nullptr; ++i) {
      if (pool_[i].use_count() == 1) out = pool_[i];  // the pool alone
    }
    if (out == nullptr) {
      out = std::forward<Make>(make)();
      pool_.push_back(out);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    return out;
  }

  size_t size() const { return pool_.size(); }

 private:
  std::vector<std::shared_ptr<T>> pool_;
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_REUSE_POOL_H_
