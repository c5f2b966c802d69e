#include "runtime/tensor/aligned_buffer.h"

#include <cstring>
#include <new>

namespace kubetrain {

AlignedBuffer::AlignedBuffer(size_t size) { EnsureSize(size); }

void AlignedBuffer::EnsureSize(size_t size) {
  if (size <= size_ && data_ != nullptr) return;
  size_t bytes = (size * sizeof(float) + kAlignment - 1) / kAlignment * kAlignment;
  if (bytes == 0) bytes = kAlignment;
  void* p = std::aligned_alloc(kAlignment, bytes);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  data_.reset(static_cast<float*>(p));
  size_ = size;
}

}  // namespace kubetrain
