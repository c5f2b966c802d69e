// FlatParameters: every trainable tensor of a model lives in ONE contiguous
// float buffer, and its gradient in ONE parallel buffer of the same layout.
// Layers get TensorViews into both. Exchanges (parameter-server shards,
// allreduce buckets) then work on plain contiguous ranges with no packing.
//
// Usage: Reserve() every tensor (layout phase), then Allocate() once, then
// Param(i)/Grad(i) return views. Not thread-safe; after Allocate() the
// layout is immutable and the buffers may be read/written from any thread
// under the caller's synchronisation.
#ifndef KUBETRAIN_RUNTIME_TENSOR_FLAT_BUFFER_H_
#define KUBETRAIN_RUNTIME_TENSOR_FLAT_BUFFER_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/tensor/aligned_buffer.h"
#include "runtime/tensor/shape.h"
#include "runtime/tensor/tensor_view.h"

namespace kubetrain {

struct FlatEntry {
  std::string name;
  Shape shape;
  int64_t offset = 0;  // elements from the start of the buffer
  int64_t size = 0;
};

class FlatParameters {
 public:
  FlatParameters() = default;
  FlatParameters(const FlatParameters&) = delete;
  FlatParameters& operator=(const FlatParameters&) = delete;

  // Layout phase: appends a tensor; returns its index. Offsets are padded to
  // 16 elements (64 bytes) so each tensor starts cache-line aligned.
  int Reserve(std::string name, Shape shape);

  // Allocates both buffers (zeroed). Call once, after all Reserve() calls.
  void Allocate();

  int64_t size() const { return total_; }
  const std::vector<FlatEntry>& entries() const { return entries_; }

  std::span<float> params() { return params_.span(); }
  std::span<const float> params() const { return params_.span(); }
  std::span<float> grads() { return grads_.span(); }
  std::span<const float> grads() const { return grads_.span(); }

  TensorView Param(int index);
  TensorView Grad(int index);

 private:
  std::vector<FlatEntry> entries_;
  int64_t total_ = 0;
  bool allocated_ = false;
  AlignedBuffer params_;
  AlignedBuffer grads_;
};

}  // namespace kubetrain

#endif  // KUBETRAIN_RUNTIME_TENSOR_FLAT_BUFFER_H_
