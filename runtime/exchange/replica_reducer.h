// ReplicaReducer: sums and broadcasts flat buffers across the device
// replicas of one pod (`kubetrain train --gpus N`, `--cpu-replicas N`): N
// copies of the model, each on its own ComputeDevice, in one process. The
// trainer sums the replicas' weighted gradients into replica 0 with it,
// hands that one gradient to the pod's Exchange, and broadcasts the
// resulting parameters back to every replica.
// Implementations: HostReplicaReducer (host_replica_reducer.h: through host
// memory, any device, always built) and NcclReplicaReducer
// (nccl_replica_reducer.h: NCCL on device pointers, CUDA builds).
// OpenReplicaReducer picks one; it holds this code's only
// `#ifdef KUBETRAIN_WITH_CUDA`.
// Not thread-safe: one collective at a time, from one thread.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_REPLICA_REDUCER_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_REPLICA_REDUCER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/tensor/compute_device.h"

namespace kubetrain::exchange {

class ReplicaReducer {
 public:
  virtual ~ReplicaReducer() = default;

  virtual std::string name() const = 0;
  // How many replicas (devices) take part; buffer lists have this length.
  virtual int replicas() const = 0;

  // buffers[r] holds n floats in replica r's device memory. Each call first
  // waits for the work queued on every replica's device, and returns when
  // the result is in place (nothing is left queued).
  //
  // buffers[root] <- the element-wise sum over every replica's buffer. The
  // other buffers are left unchanged.
  virtual absl::Status Sum(int root, std::span<float* const> buffers, int64_t n) = 0;
  // buffers[r] <- buffers[root], bit for bit, for every replica r.
  virtual absl::Status Broadcast(int root, std::span<float* const> buffers, int64_t n) = 0;
};

// Checks a Sum/Broadcast call's arguments against `devices` (the reducer's
// replicas), then waits for the work queued on every device: what both
// implementations do before touching the buffers.
absl::Status CheckAndDrain(std::span<ComputeDevice* const> devices, int root,
                           std::span<float* const> buffers, int64_t n);

// The reducer for `devices` (borrowed; they outlive it): NCCL when every
// device is a CUDA GPU (distinct, in a CUDA build), else the host reducer.
absl::StatusOr<std::unique_ptr<ReplicaReducer>> OpenReplicaReducer(
    std::vector<ComputeDevice*> devices);

}  // namespace kubetrain::exchange

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_REPLICA_REDUCER_H_
