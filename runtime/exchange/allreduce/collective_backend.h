// Which allreduce backend a job uses, decided here and nowhere else:
// candidates in order, the first that applies wins.
//   1. nccl: every rank's tensors are on a GPU of its own (their device
//      UUIDs, exchanged at the rendezvous, all differ), this build has CUDA
//      and rank 0 made an NCCL id. Ranks that share a GPU (`kubetrain run`
//      on a one-GPU workstation) cannot form an NCCL communicator.
//   2. ring: the TCP ring over host memory (GPU tensors staged through
//      pinned buffers); always available.
// A world of one rank exchanges nothing, so `auto` gives it the ring (no
// communicator to set up); a named backend still runs it.
// `--allreduce-backend auto|ring|nccl` may name one; naming one that cannot
// run is FailedPrecondition with the reason (a permanent exit 1: the same
// spec fails the same way on a restart). Every rank decides from the same
// world, so all agree. The only `#ifdef KUBETRAIN_WITH_CUDA` of the
// allreduce code lives in the .cc. Thread-safe.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_COLLECTIVE_BACKEND_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_COLLECTIVE_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/exchange/allreduce/device_collective.h"
#include "runtime/tensor/compute_device.h"

namespace kubetrain::allreduce {

// Whether this build can run NCCL at all.
bool NcclCompiledIn();

// One rank as the choice sees it.
struct RankDevice {
  std::string name;      // "worker-1"
  std::string gpu_uuid;  // the GPU of its tensors; empty: host memory
};

struct BackendChoice {
  std::string backend;  // "nccl" or "ring"
  std::string reason;   // why, for the log line every rank prints
};

// This rank alone, before it joins: `requested` must be auto, ring or nccl,
// and nccl needs NCCL (`nccl_compiled_in`: NcclCompiledIn(), or a test's
// stand-in collective) and this rank's tensors on a GPU.
absl::Status CheckRequestedBackend(const std::string& requested, bool nccl_compiled_in,
                                   bool tensors_on_gpu);

// The backend of a world (rank order), from what the rendezvous gathered.
absl::StatusOr<BackendChoice> ChooseCollectiveBackend(const std::string& requested,
                                                      bool nccl_compiled_in,
                                                      const std::vector<RankDevice>& world,
                                                      bool have_nccl_id);

// NCCL pieces, Unimplemented without CUDA.
absl::StatusOr<std::string> NewNcclUniqueId();
// Joins the communicator on `device` (a GPU; borrowed, must outlive it),
// queuing on its stream; waits until every rank joins, calling `check`
// (its error abandons the join).
absl::StatusOr<std::unique_ptr<DeviceCollective>> MakeNcclCollective(
    int rank, int world, const std::string& unique_id, ComputeDevice& device,
    const exchange::IoCheck& check);

}  // namespace kubetrain::allreduce

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_COLLECTIVE_BACKEND_H_
