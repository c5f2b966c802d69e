#include "runtime/exchange/nccl_replica_reducer.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include "absl/strings/str_cat.h"
#include "runtime/exchange/nccl_status.h"

namespace kubetrain::exchange {

struct NcclReplicaReducer::Impl {
  std::vector<int> gpus;  // CUDA device index of each replica
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;

  ~Impl() {
    for (size_t r = 0; r < gpus.size(); ++r) {
      cudaSetDevice(gpus[r]);
      if (r < comms.size() && comms[r] != nullptr) ncclCommDestroy(comms[r]);
      if (r < streams.size() && streams[r] != nullptr) cudaStreamDestroy(streams[r]);
    }
  }
};

absl::StatusOr<std::unique_ptr<NcclReplicaReducer>> NcclReplicaReducer::Create(
    std::vector<ComputeDevice*> devices) {
  auto impl = std::make_unique<Impl>();
  for (ComputeDevice* d : devices) {
    if (d->info().kind != DeviceKind::kCuda || d->host_memory()) {
      return absl::InvalidArgumentError(
          absl::StrCat("NCCL reduces across GPUs; ", d->info().Id(), " is not one"));
    }
    for (int g : impl->gpus) {
      if (g == d->info().index) {
        return absl::InvalidArgumentError(
            absl::StrCat("NCCL needs one GPU per replica; ", d->info().Id(), " appears twice"));
      }
    }
    impl->gpus.push_back(d->info().index);
  }
  const int n = static_cast<int>(impl->gpus.size());
  impl->streams.assign(impl->gpus.size(), nullptr);
  for (int r = 0; r < n; ++r) {
    if (cudaError_t e = cudaSetDevice(impl->gpus[r]); e != cudaSuccess) {
      return CudaStatus(e, absl::StrCat("cudaSetDevice(", impl->gpus[r], ")"));
    }
    if (cudaError_t e = cudaStreamCreateWithFlags(&impl->streams[r], cudaStreamNonBlocking);
        e != cudaSuccess) {
      return CudaStatus(e, absl::StrCat("cudaStreamCreate on cuda:", impl->gpus[r]));
    }
  }
  impl->comms.assign(impl->gpus.size(), nullptr);
  if (ncclResult_t r = ncclCommInitAll(impl->comms.data(), n, impl->gpus.data());
      r != ncclSuccess) {
    impl->comms.assign(impl->gpus.size(), nullptr);
    return NcclStatus(r, "ncclCommInitAll");
  }
  return std::unique_ptr<NcclReplicaReducer>(
      new NcclReplicaReducer(std::move(devices), std::move(impl)));
}

NcclReplicaReducer::NcclReplicaReducer(std::vector<ComputeDevice*> devices,
                                       std::unique_ptr<Impl> impl)
    : devices_(std::move(devices)), impl_(std::move(impl)) {}

NcclReplicaReducer::~NcclReplicaReducer() = default;

absl::Status NcclReplicaReducer::Run(bool reduce, int root, std::span<float* const> buffers,
                                     int64_t n) {
  if (absl::Status s = CheckAndDrain(devices_, root, buffers, n); !s.ok()) return s;
  if (n == 0) return absl::OkStatus();
  const char* what = reduce ? "ncclReduce" : "ncclBroadcast";
  if (ncclResult_t r = ncclGroupStart(); r != ncclSuccess) return NcclStatus(r, "ncclGroupStart");
  ncclResult_t first = ncclSuccess;
  for (size_t r = 0; r < buffers.size(); ++r) {
    cudaSetDevice(impl_->gpus[r]);
    float* b = buffers[r];
    const ncclResult_t res = reduce ? ncclReduce(b, b, static_cast<size_t>(n), ncclFloat, ncclSum,
                                                 root, impl_->comms[r], impl_->streams[r])
                                    : ncclBroadcast(b, b, static_cast<size_t>(n), ncclFloat, root,
                                                    impl_->comms[r], impl_->streams[r]);
    if (first == ncclSuccess) first = res;
  }
  const ncclResult_t ended = ncclGroupEnd();
  if (first != ncclSuccess) return NcclStatus(first, what);
  if (ended != ncclSuccess) return NcclStatus(ended, what);
  for (size_t r = 0; r < buffers.size(); ++r) {
    cudaSetDevice(impl_->gpus[r]);
    if (cudaError_t e = cudaStreamSynchronize(impl_->streams[r]); e != cudaSuccess) {
      return CudaStatus(e, absl::StrCat(what, " on cuda:", impl_->gpus[r]));
    }
  }
  return absl::OkStatus();
}

absl::Status NcclReplicaReducer::Sum(int root, std::span<float* const> buffers, int64_t n) {
  return Run(/*reduce=*/true, root, buffers, n);
}

absl::Status NcclReplicaReducer::Broadcast(int root, std::span<float* const> buffers, int64_t n) {
  return Run(/*reduce=*/false, root, buffers, n);
}

}  // namespace kubetrain::exchange
