// Compute devices: what this process can train on, in preference order.
// Candidates come from one ordered list (CUDA GPUs first when the build has
// CUDA and a GPU is visible, then the CPU); the `#ifdef KUBETRAIN_WITH_CUDA`
// lives only in device.cc. Functions are thread-safe.
#ifndef KUBETRAIN_RUNTIME_TENSOR_DEVICE_H_
#define KUBETRAIN_RUNTIME_TENSOR_DEVICE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kubetrain {

enum class DeviceKind { kCpu, kCuda };

struct DeviceInfo {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;
  std::string name;          // "cpu" or the GPU's product name
  int64_t memory_bytes = 0;  // GPU memory, or 0 for the CPU
  int cores = 0;             // CPUs available, or multiprocessors of a GPU
  // A GPU's identity across processes, as nvidia-smi prints it
  // ("GPU-8b1e...": the same GPU seen by two pods gives the same string,
  // whatever its index in each); empty for the CPU.
  std::string uuid;

  std::string Id() const;  // "cpu", "cuda:0"
};

// Whether this binary was built with the CUDA backend.
bool BuiltWithCuda();

// Every usable device, best first. Always ends with the CPU. When the build
// has CUDA but no GPU is usable, `why_no_gpu` (if non-null) says why.
std::vector<DeviceInfo> ListDevices(std::string* why_no_gpu = nullptr);

// Resolves "auto" (the first device), "cpu", "cuda" (the first GPU) or
// "cuda:N". NotFound / Unavailable when it is not present.
absl::StatusOr<DeviceInfo> SelectDevice(const std::string& request);

// The devices of one pod's replicas (`kubetrain train --gpus N`,
// `--cpu-replicas N`), from `request` as SelectDevice resolves it:
// - a GPU: `gpus` GPUs from the selected one on (cuda:K .. cuda:K+gpus-1).
//   gpus 0 means every visible GPU for "auto" and "cuda" (in a pod, the
//   ones the device plugin exposed: its nvidia.com/gpu limit), one for
//   "cuda:K". Fewer visible than asked: Unavailable, naming how many are.
// - the CPU: `cpu_replicas` replicas on it (they share its threads). gpus
//   above 0 there is Unavailable with the reason no GPU is usable.
// cpu_replicas above 1 with a GPU, or a negative count: InvalidArgument.
absl::StatusOr<std::vector<DeviceInfo>> SelectDevices(const std::string& request, int gpus,
                                                      int cpu_replicas);

struct DeviceOptions {
  // cuBLAS may round GEMM inputs to TF32 on tensor cores (about 1e-3
  // relative error per product, several times the throughput).
  bool allow_tf32 = false;
};

class ComputeDevice;  // compute_device.h

// The ComputeDevice for `info`: a CpuDevice, or the CUDA device (CUDA
// builds). Unavailable, in one line with the driver's reason, when the GPU
// cannot be opened.
absl::StatusOr<std::unique_ptr<ComputeDevice>> OpenComputeDevice(const DeviceInfo& info,
                                                                 const DeviceOptions& options);

}  // namespace kubetrain

#endif  // KUBETRAIN_RUNTIME_TENSOR_DEVICE_H_
