#include "runtime/exchange/allreduce/nccl_collective.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"

namespace kubetrain::allreduce {
namespace {

absl::Status CudaError(cudaError_t e, const char* what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", cudaGetErrorString(e)));
}

absl::Status NcclError(ncclResult_t r, const char* what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", ncclGetErrorString(r)));
}

}  // namespace

struct NcclCollective::Impl {
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* buffer = nullptr;
  size_t capacity = 0;  // elements
  std::atomic<bool> aborted{false};
};

absl::StatusOr<std::string> NcclCollective::NewUniqueId() {
  ncclUniqueId id;
  if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
    return NcclError(r, "ncclGetUniqueId");
  }
  return std::string(id.internal, sizeof(id.internal));
}

absl::StatusOr<std::unique_ptr<NcclCollective>> NcclCollective::Create(int rank, int world,
                                                                       const std::string& unique_id,
                                                                       int device) {
  ncclUniqueId id;
  if (unique_id.size() != sizeof(id.internal)) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL unique id has ", unique_id.size(),
                                                   " bytes, expected ", sizeof(id.internal)));
  }
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return CudaError(e, "cudaSetDevice");
  if (cudaError_t e = cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking);
      e != cudaSuccess) {
    return CudaError(e, "cudaStreamCreate");
  }
  if (ncclResult_t r = ncclCommInitRank(&impl->comm, world, id, rank); r != ncclSuccess) {
    cudaStreamDestroy(impl->stream);
    return NcclError(r, "ncclCommInitRank");
  }
  std::unique_ptr<NcclCollective> c(new NcclCollective(std::move(impl)));
  c->world_ = world;
  return c;
}

NcclCollective::NcclCollective(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

NcclCollective::~NcclCollective() {
  if (impl_ == nullptr) return;
  cudaSetDevice(impl_->device);
  if (impl_->comm != nullptr) {
    if (impl_->aborted) {
      ncclCommAbort(impl_->comm);
    } else {
      ncclCommDestroy(impl_->comm);
    }
  }
  if (impl_->buffer != nullptr) cudaFree(impl_->buffer);
  if (impl_->stream != nullptr) cudaStreamDestroy(impl_->stream);
}

void NcclCollective::Shutdown() { impl_->aborted = true; }

absl::Status NcclCollective::Run(std::span<float> data, bool allreduce, int root,
                                 const exchange::IoCheck& check) {
  if (data.empty()) return absl::OkStatus();
  if (impl_->aborted) return absl::AbortedError("the NCCL communicator was shut down");
  cudaSetDevice(impl_->device);
  if (data.size() > impl_->capacity) {
    if (impl_->buffer != nullptr) cudaFree(impl_->buffer);
    impl_->buffer = nullptr;
    if (cudaError_t e = cudaMalloc(&impl_->buffer, data.size() * sizeof(float)); e != cudaSuccess) {
      impl_->capacity = 0;
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", data.size() * sizeof(float),
                       " bytes of GPU memory for an allreduce bucket (lower --bucket-mb): ",
                       cudaGetErrorString(e)));
    }
    impl_->capacity = data.size();
  }
  const size_t bytes = data.size() * sizeof(float);
  cudaMemcpyAsync(impl_->buffer, data.data(), bytes, cudaMemcpyHostToDevice, impl_->stream);
  ncclResult_t r = allreduce ? ncclAllReduce(impl_->buffer, impl_->buffer, data.size(), ncclFloat,
                                             ncclSum, impl_->comm, impl_->stream)
                             : ncclBroadcast(impl_->buffer, impl_->buffer, data.size(), ncclFloat,
                                             root, impl_->comm, impl_->stream);
  if (r != ncclSuccess) return NcclError(r, allreduce ? "ncclAllReduce" : "ncclBroadcast");
  cudaMemcpyAsync(data.data(), impl_->buffer, bytes, cudaMemcpyDeviceToHost, impl_->stream);
  // Poll instead of blocking so a lost peer (the caller's check) can abort
  // the communicator rather than hang in NCCL forever.
  while (true) {
    const cudaError_t q = cudaStreamQuery(impl_->stream);
    if (q == cudaSuccess) break;
    if (q != cudaErrorNotReady) return CudaError(q, "NCCL stream");
    ncclResult_t async_error = ncclSuccess;
    ncclCommGetAsyncError(impl_->comm, &async_error);
    if (async_error != ncclSuccess) {
      impl_->aborted = true;
      return NcclError(async_error, "NCCL");
    }
    if (check) {
      if (absl::Status s = check(); !s.ok()) {
        impl_->aborted = true;
        return s;
      }
    }
    if (impl_->aborted) return absl::AbortedError("the NCCL communicator was shut down");
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // stream poll interval
  }
  bytes_ += static_cast<int64_t>(bytes);
  return absl::OkStatus();
}

absl::Status NcclCollective::AllreduceSum(std::span<float> data, const exchange::IoCheck& check) {
  return Run(data, /*allreduce=*/true, 0, check);
}

absl::Status NcclCollective::Broadcast(std::span<float> data, int root,
                                       const exchange::IoCheck& check) {
  return Run(data, /*allreduce=*/false, root, check);
}

}  // namespace kubetrain::allreduce
