// NcclCollective: the allreduce data plane on GPUs, through NCCL. Compiled
// only with KUBETRAIN_WITH_CUDA; reach it through collective_backend.h.
// The unique id travels through the rendezvous (rank 0 makes it). Buffers
// handed in live in host memory today (the trainer's tensors are on the
// CPU): each collective stages them through a device buffer on this
// collective's own stream, and polls the stream so the caller's check can
// abort the communicator when a peer is lost (ncclCommAbort).
// Not thread-safe: one collective at a time, except Shutdown().
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_NCCL_COLLECTIVE_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_NCCL_COLLECTIVE_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/exchange/allreduce/collective.h"

namespace kubetrain::allreduce {

class NcclCollective final : public Collective {
 public:
  // A fresh NCCL unique id (rank 0), as bytes.
  static absl::StatusOr<std::string> NewUniqueId();
  // Joins the communicator on GPU `device`; blocks until every rank joins.
  static absl::StatusOr<std::unique_ptr<NcclCollective>> Create(int rank, int world,
                                                                const std::string& unique_id,
                                                                int device);
  ~NcclCollective() override;

  std::string name() const override { return "nccl"; }
  absl::Status AllreduceSum(std::span<float> data, const exchange::IoCheck& check) override;
  absl::Status Broadcast(std::span<float> data, int root, const exchange::IoCheck& check) override;
  int failed_peer() const override { return -1; }
  int64_t bytes_sent() const override { return bytes_.load(); }
  int64_t bytes_received() const override { return bytes_.load(); }
  void Shutdown() override;

 private:
  struct Impl;
  explicit NcclCollective(std::unique_ptr<Impl> impl);
  absl::Status Run(std::span<float> data, bool allreduce, int root, const exchange::IoCheck& check);

  std::unique_ptr<Impl> impl_;
  int world_ = 1;
  std::atomic<int64_t> bytes_{0};
};

}  // namespace kubetrain::allreduce

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_NCCL_COLLECTIVE_H_
