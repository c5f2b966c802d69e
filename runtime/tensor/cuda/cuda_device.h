// The CUDA ComputeDevice: device buffers from cudaMalloc, GEMMs through
// cuBLAS (TF32 tensor cores when DeviceOptions::allow_tf32), and one-thread-
// per-element launches of the shared host/device kernels, all queued on one
// stream per device. Compiled only when KUBETRAIN_WITH_CUDA is ON; callers
// outside runtime/tensor go through OpenComputeDevice (device.h).
// Not thread-safe (ComputeDevice's contract).
#ifndef KUBETRAIN_RUNTIME_TENSOR_CUDA_CUDA_DEVICE_H_
#define KUBETRAIN_RUNTIME_TENSOR_CUDA_CUDA_DEVICE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/tensor/compute_device.h"

namespace kubetrain::cuda {

// Opens GPU `info.index`: sets it current, creates the stream and the cuBLAS
// handle. Unavailable with the driver's reason when that fails.
absl::StatusOr<std::unique_ptr<ComputeDevice>> OpenCudaDevice(const DeviceInfo& info,
                                                              const DeviceOptions& options);

}  // namespace kubetrain::cuda

#endif  // KUBETRAIN_RUNTIME_TENSOR_CUDA_CUDA_DEVICE_H_
