#include "runtime/exchange/replica_reducer.h"

#include "runtime/exchange/host_replica_reducer.h"

#ifdef KUBETRAIN_WITH_CUDA
#include "runtime/exchange/nccl_replica_reducer.h"
#endif

namespace kubetrain::exchange {

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
