// HostReplicaReducer: the ReplicaReducer through host memory, for any
// devices: buffers are copied to the host (read in place for devices whose
// memory is host memory), summed there in replica order 0, 1, ... N-1 (so
// the result does not depend on timing), and copied back. The reducer for
// CPU replicas and for tests (FakeDevice); correct, not fast, on GPUs.
// Not thread-safe (ReplicaReducer's contract).
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_HOST_REPLICA_REDUCER_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_HOST_REPLICA_REDUCER_H_

#include <vector>

#include "runtime/exchange/replica_reducer.h"

namespace kubetrain::exchange {

class HostReplicaReducer final : public ReplicaReducer {
 public:
  // Borrows the devices; they outlive the reducer.
  explicit HostReplicaReducer(std::vector<ComputeDevice*> devices) : devices_(std::move(devices)) {}

  std::string name() const override { return "host"; }
  int replicas() const override { return static_cast<int>(devices_.size()); }
  absl::Status Sum(int root, std::span<float* const> buffers, int64_t n) override;
  absl::Status Broadcast(int root, std::span<float* const> buffers, int64_t n) override;

 private:
  // Replica r's buffer readable on the host: in place, or copied to `staging`.
  absl::StatusOr<const float*> OnHost(int r, const float* buffer, int64_t n,
                                      std::vector<float>& staging);
  absl::Status Write(int r, const float* host, float* buffer, int64_t n);

  std::vector<ComputeDevice*> devices_;
  std::vector<float> sum_, staging_;
};

}  // namespace kubetrain::exchange

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_HOST_REPLICA_REDUCER_H_
