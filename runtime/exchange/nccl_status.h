// NCCL and CUDA results as absl::Status, one mapping for every NCCL user
// (the in-pod NcclReplicaReducer, the cross-pod NcclCollective): a peer
// that went away (NCCL's system and remote errors: sockets, the network) is
// Unavailable, which a replica turns into its retryable lost-peer exit 129;
// misuse (two ranks on one GPU: invalid usage) is FailedPrecondition and a
// bad argument InvalidArgument, both permanent (exit 1); a driver or CUDA
// fault and NCCL's own internal errors are Internal. Compiled only with
// KUBETRAIN_WITH_CUDA. Pure functions; thread-safe.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_NCCL_STATUS_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_NCCL_STATUS_H_

#include <cuda_runtime.h>
#include <nccl.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace kubetrain::exchange {

inline absl::Status NcclStatus(ncclResult_t r, absl::string_view what) {
  if (r == ncclSuccess) return absl::OkStatus();
  const std::string message = absl::StrCat(what, ": ", ncclGetErrorString(r));
  switch (r) {
    case ncclSystemError:
    case ncclRemoteError:
      return absl::UnavailableError(message);
    case ncclInvalidUsage:
      return absl::FailedPreconditionError(message);
    case ncclInvalidArgument:
      return absl::InvalidArgumentError(message);
    default:  // ncclUnhandledCudaError, ncclInternalError, ...
      return absl::InternalError(message);
  }
}

inline absl::Status CudaStatus(cudaError_t e, absl::string_view what) {
  if (e == cudaSuccess) return absl::OkStatus();
  if (e == cudaErrorMemoryAllocation) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": ", cudaGetErrorString(e)));
  }
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(e)));
}

}  // namespace kubetrain::exchange

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_NCCL_STATUS_H_
