// Collective: the allreduce data plane of one rank, over host buffers.
// Backends: RingAllreduce (TCP ring, CPUs) and NcclCollective (GPUs, built
// with CUDA); collective_backend.h picks one from an ordered list.
// Not thread-safe: one collective at a time, except Shutdown().
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_COLLECTIVE_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_COLLECTIVE_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "runtime/exchange/tcp_link.h"

namespace kubetrain::allreduce {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual std::string name() const = 0;
  // data <- elementwise sum over every rank. `check` is polled while
  // waiting; its error abandons the collective.
  virtual absl::Status AllreduceSum(std::span<float> data, const exchange::IoCheck& check) = 0;
  // data <- root's data, bit for bit.
  virtual absl::Status Broadcast(std::span<float> data, int root,
                                 const exchange::IoCheck& check) = 0;
  // The rank whose link failed in the last failed collective, or -1.
  virtual int failed_peer() const = 0;
  virtual int64_t bytes_sent() const = 0;
  virtual int64_t bytes_received() const = 0;
  // Unblocks a collective in flight from another thread.
  virtual void Shutdown() = 0;
};

}  // namespace kubetrain::allreduce

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_COLLECTIVE_H_
