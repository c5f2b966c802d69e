#include "runtime/exchange/allreduce/collective_backend.h"

#include "absl/strings/str_cat.h"
#ifdef KUBETRAIN_WITH_CUDA
#include "runtime/exchange/allreduce/nccl_collective.h"
#endif

namespace kubetrain::allreduce {

bool NcclCompiledIn() {
#ifdef KUBETRAIN_WITH_CUDA
  return true;
#else
  return false;
#endif
}

absl::StatusOr<std::string> ChooseCollectiveBackend(const std::string& requested,
                                                    bool tensors_on_gpu) {
  if (requested != "auto" && requested != "ring" && requested != "nccl") {
    return absl::InvalidArgumentError(
        absl::StrCat("--allreduce-backend must be auto, ring or nccl, not '", requested, "'"));
  }
  struct Candidate {
    const char* name;
    bool applies;
    std::string why_not;
  };
  const Candidate candidates[] = {
      {"nccl", NcclCompiledIn() && tensors_on_gpu,
       !NcclCompiledIn() ? "this build has no CUDA (KUBETRAIN_WITH_CUDA=OFF)"
                         : "the model's tensors are not on a GPU"},
      {"ring", true, ""},
  };
  for (const Candidate& c : candidates) {
    if (requested == c.name) {
      // Named explicitly: NCCL also runs host tensors (staged through the
      // GPU), so only a build without CUDA rules it out.
      if (requested == "nccl" && !NcclCompiledIn()) {
        return absl::FailedPreconditionError(absl::StrCat("--allreduce-backend nccl: ", c.why_not));
      }
      return std::string(c.name);
    }
    if (requested == "auto" && c.applies) return std::string(c.name);
  }
  return std::string("ring");
}

absl::StatusOr<std::string> NewNcclUniqueId() {
#ifdef KUBETRAIN_WITH_CUDA
  return NcclCollective::NewUniqueId();
#else
  return absl::UnimplementedError("NCCL needs a build with KUBETRAIN_WITH_CUDA=ON");
#endif
}

absl::StatusOr<std::unique_ptr<Collective>> MakeNcclCollective(int rank, int world,
                                                               const std::string& unique_id,
                                                               int device) {
#ifdef KUBETRAIN_WITH_CUDA
  absl::StatusOr<std::unique_ptr<NcclCollective>> c =
      NcclCollective::Create(rank, world, unique_id, device);
  if (!c.ok()) return c.status();
  return std::unique_ptr<Collective>(std::move(*c));
#else
  (void)rank;
  (void)world;
  (void)unique_id;
  (void)device;
  return absl::UnimplementedError("NCCL needs a build with KUBETRAIN_WITH_CUDA=ON");
#endif
}

}  // namespace kubetrain::allreduce
