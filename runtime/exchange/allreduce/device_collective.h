// DeviceCollective: the allreduce data plane of one rank over a device's
// memory, queued on that device (NCCL: Horovod's NCCLAllreduce shape, and
// PyTorch DDP's). A call returns once the collective is queued, in order
// with the device's own work: it runs after everything the device had
// queued when it was called, on the collective's own stream, so it overlaps
// the compute queued after it; Join() makes the device's later work wait
// for every collective queued so far. Nothing waits on the host except
// WaitJoined, which polls so that a lost peer (the caller's check, or the
// communicator's own error) abandons the communicator instead of hanging.
// The host-memory counterpart is Collective (collective.h: the TCP ring).
// Errors follow nccl_status.h: a lost peer Unavailable, misuse
// FailedPrecondition, driver faults Internal.
// Not thread-safe: the device's thread queues; WaitJoined and Shutdown may
// come from one other thread.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_DEVICE_COLLECTIVE_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_DEVICE_COLLECTIVE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/exchange/tcp_link.h"

namespace kubetrain::allreduce {

class DeviceCollective {
 public:
  virtual ~DeviceCollective() = default;
  virtual std::string name() const = 0;
  // Queuing may itself wait (NCCL connects to a peer on its first
  // collective with it, or its queue is full behind a stuck one): `check`
  // is called while it does, and its error abandons the communicator, as
  // any error of these calls does.
  // out[0, n) <- the elementwise sum over every rank of in[0, n) (device
  // memory; in and out may be the same).
  virtual absl::Status AllreduceSum(const float* in, float* out, int64_t n,
                                    const exchange::IoCheck& check) = 0;
  // data[0, n) <- root's, bit for bit.
  virtual absl::Status Broadcast(float* data, int64_t n, int root,
                                 const exchange::IoCheck& check) = 0;
  // The device's work queued from now on waits for the collectives queued
  // so far; returns this join's number (1, 2, ...).
  virtual absl::StatusOr<int64_t> Join() = 0;
  // Blocks until the collectives queued before join `join` have run,
  // calling `check` while it waits; its error, or the communicator's,
  // abandons the communicator. Only the last kWaitableJoins joins can be
  // waited for. May run on another thread than the one that queues (the
  // exchange's watchdog), one waiter at a time.
  static constexpr int kWaitableJoins = 4;
  virtual absl::Status WaitJoined(int64_t join, const exchange::IoCheck& check) = 0;
  // Bytes this rank has handed to collectives.
  virtual int64_t bytes() const = 0;
  // Abandons the communicator: a wait in flight (any thread) and later
  // calls fail.
  virtual void Shutdown() = 0;
};

}  // namespace kubetrain::allreduce

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_DEVICE_COLLECTIVE_H_
