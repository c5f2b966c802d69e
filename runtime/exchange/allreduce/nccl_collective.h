// NcclCollective: the DeviceCollective of GPUs, through NCCL. Compiled only
// with KUBETRAIN_WITH_CUDA; reach it through collective_backend.h. The
// unique id travels through the rendezvous (rank 0 makes it). Collectives
// run on the collective's own stream, ordered after the compute stream's
// work by an event at each call and joined back into it by Join (no host
// wait). The communicator is non-blocking (ncclConfig_t::blocking = 0): a
// call that must wait (its init, a first connection to a peer) returns at
// once and is polled, with the caller's check, so that ncclCommAbort can
// end a communicator whose peer is lost from another thread while a call
// is pending; WaitJoined polls an event, the communicator's asynchronous
// error and the check the same way. Nothing hangs in NCCL.
// Thread-safety as DeviceCollective's.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_NCCL_COLLECTIVE_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_NCCL_COLLECTIVE_H_

#include <nccl.h>

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/exchange/allreduce/device_collective.h"
#include "runtime/tensor/compute_device.h"

namespace kubetrain::allreduce {

class NcclCollective final : public DeviceCollective {
 public:
  // A fresh NCCL unique id (rank 0), as bytes.
  static absl::StatusOr<std::string> NewUniqueId();
  // Joins the communicator on `device` (a GPU: its index and its stream,
  // native_queue()); blocks until every rank joins. Borrows the device.
  static absl::StatusOr<std::unique_ptr<NcclCollective>> Create(int rank, int world,
                                                                const std::string& unique_id,
                                                                ComputeDevice& device,
                                                                const exchange::IoCheck& check);
  ~NcclCollective() override;

  std::string name() const override { return "nccl"; }
  absl::Status AllreduceSum(const float* in, float* out, int64_t n,
                            const exchange::IoCheck& check) override;
  absl::Status Broadcast(float* data, int64_t n, int root, const exchange::IoCheck& check) override;
  absl::StatusOr<int64_t> Join() override;
  absl::Status WaitJoined(int64_t join, const exchange::IoCheck& check) override;
  int64_t bytes() const override { return bytes_.load(); }
  void Shutdown() override;

 private:
  struct Impl;
  explicit NcclCollective(std::unique_ptr<Impl> impl);
  // Orders the collective stream after the compute stream's queued work.
  absl::Status Fork();
  // A non-blocking call's result: ncclInProgress is waited out (polling the
  // communicator and `check`); any error abandons the communicator.
  absl::Status Settle(ncclResult_t started, const char* what, const exchange::IoCheck& check);

  std::unique_ptr<Impl> impl_;
  std::atomic<int64_t> bytes_{0};
};

}  // namespace kubetrain::allreduce

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_NCCL_COLLECTIVE_H_
