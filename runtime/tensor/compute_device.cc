#include "runtime/tensor/compute_device.h"

namespace kubetrain {

absl::Status EnsureBytes(ComputeDevice& device, DeviceBuffer& buffer, size_t bytes) {
  if (buffer.bytes() >= bytes && buffer.data() != nullptr) return absl::OkStatus();
  buffer = DeviceBuffer();  // free first: the old and new need not both fit
  absl::StatusOr<DeviceBuffer> b = device.Allocate(bytes);
  if (!b.ok()) return b.status();
  buffer = *std::move(b);
  return absl::OkStatus();
}

}  // namespace kubetrain
