#include "runtime/exchange/replica_reducer.h"

#include "absl/strings/str_cat.h"
#include "runtime/exchange/host_replica_reducer.h"

#ifdef KUBETRAIN_WITH_CUDA
#include "runtime/exchange/nccl_replica_reducer.h"
#endif

namespace kubetrain::exchange {

absl::Status CheckAndDrain(std::span<ComputeDevice* const> devices, int root,
                           std::span<float* const> buffers, int64_t n) {
  const int replicas = static_cast<int>(devices.size());
  if (buffers.size() != devices.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("replica reducer: ", buffers.size(), " buffers for ", replicas, " replicas"));
  }
  if (root < 0 || root >= replicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("replica reducer: root ", root, " outside [0, ", replicas, ")"));
  }
  if (n < 0) return absl::InvalidArgumentError("replica reducer: negative length");
  // The buffers are final once every replica's queued work is drained.
  for (ComputeDevice* d : devices) {
    if (absl::Status s = d->Synchronize(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ReplicaReducer>> OpenReplicaReducer(
    std::vector<ComputeDevice*> devices) {
  if (devices.empty()) return absl::InvalidArgumentError("replica reducer: no devices");
  // Candidates, best first: NCCL on the GPUs' own memory, then the host.
  bool all_gpus = true;
  for (ComputeDevice* d : devices) {
    all_gpus = all_gpus && d->info().kind == DeviceKind::kCuda && !d->host_memory();
  }
#ifdef KUBETRAIN_WITH_CUDA
  if (all_gpus) {
    absl::StatusOr<std::unique_ptr<NcclReplicaReducer>> nccl = NcclReplicaReducer::Create(devices);
    if (!nccl.ok()) return nccl.status();
    return std::unique_ptr<ReplicaReducer>(*std::move(nccl));
  }
#endif
  (void)all_gpus;
  return std::unique_ptr<ReplicaReducer>(new HostReplicaReducer(std::move(devices)));
}

}  // namespace kubetrain::exchange
