// FlatParameters: every trainable tensor of a model lives in ONE contiguous
// float buffer, and its gradient in ONE parallel buffer of the same layout.
// Layers get TensorViews into both. Exchanges (parameter-server shards,
// allreduce buckets) then work on plain contiguous ranges with no packing.
//
// Usage: Reserve() every tensor (layout phase), then Allocate() once (host
// memory, or a ComputeDevice's), then Param(i)/Grad(i) return views in
// that memory. Not thread-safe; after Allocate() the
// layout is immutable and the buffers may be read/written from any thread
// under the caller's synchronisation.
#ifndef KUBETRAIN_RUNTIME_TENSOR_FLAT_BUFFER_H_
#define KUBETRAIN_RUNTIME_TENSOR_FLAT_BUFFER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/tensor/aligned_buffer.h"
#include "runtime/tensor/compute_device.h"
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
  // The same in `device`'s memory (borrowed; outlives this);
  // ResourceExhausted when it does not fit.
  absl::Status Allocate(ComputeDevice& device);

  // A new FlatParameters with this layout, allocated in host memory.
  std::unique_ptr<FlatParameters> HostCopyOfLayout() const;

  int64_t size() const { return total_; }
  const std::vector<FlatEntry>& entries() const { return entries_; }

  std::span<float> params() { return {params_ptr_, static_cast<size_t>(total_)}; }
  std::span<const float> params() const { return {params_ptr_, static_cast<size_t>(total_)}; }
  std::span<float> grads() { return {grads_ptr_, static_cast<size_t>(total_)}; }
  std::span<const float> grads() const { return {grads_ptr_, static_cast<size_t>(total_)}; }

  TensorView Param(int index);
  TensorView Grad(int index);

 private:
  std::vector<FlatEntry> entries_;
  int64_t total_ = 0;
  bool allocated_ = false;
  AlignedBuffer params_;  // host memory
  AlignedBuffer grads_;
  DeviceBuffer device_params_;  // a device's memory
  DeviceBuffer device_grads_;
  float* params_ptr_ = nullptr;
  float* grads_ptr_ = nullptr;
};

}  // namespace kubetrain

#endif  // KUBETRAIN_RUNTIME_TENSOR_FLAT_BUFFER_H_
