#include "runtime/tensor/compute_device.h"

namespace kubetrain {

void ComputeDevice::DenseForward(const DenseShape& s, const float* x, const float* w,
                                 const float* bias, float* y) {
  // Broadcast the bias into y, then y += x * w^T.
  BroadcastRows(bias, s.batch, s.units, y);
  Gemm(Trans::kNo, Trans::kYes, s.batch, s.units, s.inputs, 1.0f, x, s.inputs, w, s.inputs, 1.0f, y,
       s.units);
  if (s.relu) ReluForward(y, y, s.batch * s.units);
}

void ComputeDevice::DenseBackward(const DenseShape& s, const float* x, const float* w,
                                  const float* y, const float* gy, float* masked, float* dw,
                                  float* db, float* dx) {
  if (s.relu) {
    ReluBackward(y, gy, masked, s.batch * s.units);
    gy = masked;
  }
  // dW = dY^T * X ; db = sum_rows(dY) ; dX = dY * W
  Gemm(Trans::kYes, Trans::kNo, s.units, s.inputs, s.batch, 1.0f, gy, s.units, x, s.inputs, 0.0f,
       dw, s.inputs);
  SumRows(gy, s.batch, s.units, db);
  if (dx != nullptr) {
    Gemm(Trans::kNo, Trans::kNo, s.batch, s.inputs, s.units, 1.0f, gy, s.units, w, s.inputs, 0.0f,
         dx, s.inputs);
  }
}

absl::Status EnsureBytes(ComputeDevice& device, DeviceBuffer& buffer, size_t bytes) {
  if (buffer.bytes() >= bytes && buffer.data() != nullptr) return absl::OkStatus();
  buffer = DeviceBuffer();  // free first: the old and new need not both fit
  absl::StatusOr<DeviceBuffer> b = device.Allocate(bytes);
  if (!b.ok()) return b.status();
  buffer = *std::move(b);
  return absl::OkStatus();
}

}  // namespace kubetrain
