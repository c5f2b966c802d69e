#include "runtime/tensor/device.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/tensor/blas.h"
#include "runtime/tensor/cpu_device.h"

#ifdef KUBETRAIN_WITH_CUDA
#include "runtime/tensor/cuda/cuda_device.h"
#include "runtime/tensor/cuda/cuda_runtime.h"
#endif

namespace kubetrain {

std::string DeviceInfo::Id() const {
  return kind == DeviceKind::kCpu ? std::string("cpu") : absl::StrCat("cuda:", index);
}

bool BuiltWithCuda() {
#ifdef KUBETRAIN_WITH_CUDA
  return true;
#else
  return false;
#endif
}

std::vector<DeviceInfo> ListDevices(std::string* why_no_gpu) {
  std::vector<DeviceInfo> devices;
#ifdef KUBETRAIN_WITH_CUDA
  absl::StatusOr<std::vector<DeviceInfo>> gpus = cuda::ListCudaDevices();
  if (gpus.ok()) {
    devices = *std::move(gpus);
  } else if (why_no_gpu != nullptr) {
    *why_no_gpu = std::string(gpus.status().message());
  }
#else
  if (why_no_gpu != nullptr) *why_no_gpu = "this kubetrain was built without CUDA";
#endif
  DeviceInfo cpu;
  cpu.kind = DeviceKind::kCpu;
  cpu.name = "cpu";
  cpu.cores = AvailableCpus();
  devices.push_back(cpu);
  return devices;
}

absl::StatusOr<DeviceInfo> SelectDevice(const std::string& request) {
  std::string why;
  std::vector<DeviceInfo> devices = ListDevices(&why);
  if (request == "auto") return devices.front();
  if (request == "cpu") return devices.back();
  if (request == "cuda" || absl::StartsWith(request, "cuda:")) {
    int index = 0;
    if (request != "cuda" && !absl::SimpleAtoi(request.substr(5), &index)) {
      return absl::InvalidArgumentError(absl::StrCat("bad device '", request, "'"));
    }
    for (const DeviceInfo& d : devices) {
      if (d.kind == DeviceKind::kCuda && d.index == index) return d;
    }
    return absl::UnavailableError(
        absl::StrCat("device ", request, " is not available", why.empty() ? "" : ": ", why));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown device '", request, "' (auto, cpu, cuda, cuda:N)"));
}

absl::StatusOr<std::vector<DeviceInfo>> SelectDevices(const std::string& request, int gpus,
                                                      int cpu_replicas) {
  if (gpus < 0) return absl::InvalidArgumentError(absl::StrCat("--gpus ", gpus, " is negative"));
  if (cpu_replicas < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cpu-replicas ", cpu_replicas, " must be at least 1"));
  }
  absl::StatusOr<DeviceInfo> first = SelectDevice(request);
  if (!first.ok()) return first.status();
  if (first->kind == DeviceKind::kCpu) {
    if (gpus > 0) {
      std::string why;
      ListDevices(&why);
      return absl::UnavailableError(absl::StrCat("--gpus ", gpus, " with device ", request,
                                                 ": no usable GPU", why.empty() ? "" : ": ",
                                                 why.empty() ? "" : why));
    }
    return std::vector<DeviceInfo>(static_cast<size_t>(cpu_replicas), *first);
  }
  if (cpu_replicas > 1) {
    return absl::InvalidArgumentError(absl::StrCat("--cpu-replicas ", cpu_replicas,
                                                   " applies to the CPU, but device ", request,
                                                   " is ", first->Id(), " (use --gpus)"));
  }
  std::vector<DeviceInfo> visible;
  for (const DeviceInfo& d : ListDevices()) {
    if (d.kind == DeviceKind::kCuda && d.index >= first->index) visible.push_back(d);
  }
  const bool one_named = absl::StartsWith(request, "cuda:");
  const int want = gpus > 0 ? gpus : (one_named ? 1 : static_cast<int>(visible.size()));
  if (want > static_cast<int>(visible.size())) {
    return absl::UnavailableError(absl::StrCat("--gpus ", want, " from ", first->Id(), ": only ",
                                               visible.size(), " GPU",
                                               visible.size() == 1 ? " is" : "s are", " visible"));
  }
  visible.resize(static_cast<size_t>(want));
  return visible;
}

absl::StatusOr<std::unique_ptr<ComputeDevice>> OpenComputeDevice(const DeviceInfo& info,
                                                                 const DeviceOptions& options) {
  if (info.kind == DeviceKind::kCpu) return std::unique_ptr<ComputeDevice>(new CpuDevice());
#ifdef KUBETRAIN_WITH_CUDA
  return cuda::OpenCudaDevice(info, options);
#else
  return absl::UnavailableError(
      absl::StrCat("cannot open ", info.Id(), ": this kubetrain was built without CUDA"));
#endif
}

}  // namespace kubetrain
