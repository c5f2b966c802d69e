// NcclReplicaReducer: the ReplicaReducer for N GPUs of one process, through
// NCCL on the device pointers themselves (no host copies): one communicator
// per GPU from ncclCommInitAll, each collective launched for every GPU
// inside one ncclGroupStart/ncclGroupEnd on a stream of its own. Sum is
// ncclReduce to the root (in place), Broadcast is ncclBroadcast (bit for
// bit). Each call first synchronizes the replicas' devices (their compute
// streams), and synchronizes its own streams before returning, so compute
// and communication never overlap on a buffer.
// Compiled only with KUBETRAIN_WITH_CUDA; reach it through
// OpenReplicaReducer (replica_reducer.h).
// Not thread-safe (ReplicaReducer's contract).
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_NCCL_REPLICA_REDUCER_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_NCCL_REPLICA_REDUCER_H_

#include <memory>
#include <vector>

#include "runtime/exchange/replica_reducer.h"

namespace kubetrain::exchange {

class NcclReplicaReducer final : public ReplicaReducer {
 public:
  // One communicator per device (each a CUDA GPU, distinct). Unavailable
  // with NCCL's or the driver's reason when that fails.
  static absl::StatusOr<std::unique_ptr<NcclReplicaReducer>> Create(
      std::vector<ComputeDevice*> devices);
  ~NcclReplicaReducer() override;

  std::string name() const override { return "nccl"; }
  int replicas() const override { return static_cast<int>(devices_.size()); }
  absl::Status Sum(int root, std::span<float* const> buffers, int64_t n) override;
  absl::Status Broadcast(int root, std::span<float* const> buffers, int64_t n) override;

 private:
  struct Impl;
  NcclReplicaReducer(std::vector<ComputeDevice*> devices, std::unique_ptr<Impl> impl);
  absl::Status Run(bool reduce, int root, std::span<float* const> buffers, int64_t n);

  std::vector<ComputeDevice*> devices_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kubetrain::exchange

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_NCCL_REPLICA_REDUCER_H_
