// Which allreduce backend a job uses, decided here and nowhere else:
// candidates in order, the first that applies wins.
//   1. nccl: the tensors are on GPUs and this build has CUDA (NCCL).
//   2. ring: the TCP ring on CPUs; always available.
// `--allreduce-backend auto|ring|nccl` may name one; naming one that cannot
// run is an error with the reason. The only `#ifdef KUBETRAIN_WITH_CUDA` of
// the allreduce code lives in the .cc. Thread-safe.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_COLLECTIVE_BACKEND_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_COLLECTIVE_BACKEND_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/exchange/allreduce/collective.h"

namespace kubetrain::allreduce {

// Whether this build can run NCCL at all.
bool NcclCompiledIn();

// "ring" or "nccl" for `requested` ("auto", "ring", "nccl").
absl::StatusOr<std::string> ChooseCollectiveBackend(const std::string& requested,
                                                    bool tensors_on_gpu);

// NCCL pieces, Unimplemented without CUDA.
absl::StatusOr<std::string> NewNcclUniqueId();
absl::StatusOr<std::unique_ptr<Collective>> MakeNcclCollective(int rank, int world,
                                                               const std::string& unique_id,
                                                               int device);

}  // namespace kubetrain::allreduce

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_COLLECTIVE_BACKEND_H_
