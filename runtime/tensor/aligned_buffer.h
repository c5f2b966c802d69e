// AlignedBuffer: an owned, 64-byte aligned, zero-initialised float array.
// Move-only; thread-compatible.
#ifndef KUBETRAIN_RUNTIME_TENSOR_ALIGNED_BUFFER_H_
#define KUBETRAIN_RUNTIME_TENSOR_ALIGNED_BUFFER_H_

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <span>

namespace kubetrain {

class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 64;

  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t size);

  AlignedBuffer(AlignedBuffer&&) = default;
  AlignedBuffer& operator=(AlignedBuffer&&) = default;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  size_t size() const { return size_; }
  std::span<float> span() { return {data_.get(), size_}; }
  std::span<const float> span() const { return {data_.get(), size_}; }

  // Grows (never shrinks) to at least `size` elements; contents are
  // zeroed when it grows.
  void EnsureSize(size_t size);

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float[], Free> data_;
  size_t size_ = 0;
};

}  // namespace kubetrain

#endif  // KUBETRAIN_RUNTIME_TENSOR_ALIGNED_BUFFER_H_
