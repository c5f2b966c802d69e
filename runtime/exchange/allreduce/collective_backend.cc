#include "runtime/exchange/allreduce/collective_backend.h"

#include <map>

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

absl::Status CheckRequestedBackend(const std::string& requested, bool nccl_compiled_in,
                                   bool tensors_on_gpu) {
  if (requested != "auto" && requested != "ring" && requested != "nccl") {
    return absl::InvalidArgumentError(
        absl::StrCat("--allreduce-backend must be auto, ring or nccl, not '", requested, "'"));
  }
  if (requested != "nccl") return absl::OkStatus();
  if (!nccl_compiled_in) {
    return absl::FailedPreconditionError(
        "--allreduce-backend nccl: this build has no CUDA (KUBETRAIN_WITH_CUDA=OFF)");
  }
  if (!tensors_on_gpu) {
    return absl::FailedPreconditionError(
        "--allreduce-backend nccl: the model is in host memory; NCCL reduces GPU memory "
        "(train with --device cuda, or use --allreduce-backend ring)");
  }
  return absl::OkStatus();
}

absl::StatusOr<BackendChoice> ChooseCollectiveBackend(const std::string& requested,
                                                      bool nccl_compiled_in,
                                                      const std::vector<RankDevice>& world,
                                                      bool have_nccl_id) {
  if (requested != "auto" && requested != "ring" && requested != "nccl") {
    return absl::InvalidArgumentError(
        absl::StrCat("--allreduce-backend must be auto, ring or nccl, not '", requested, "'"));
  }
  // Why NCCL cannot run this world; empty when it can.
  std::string why_not;
  if (!nccl_compiled_in) why_not = "this build has no CUDA (KUBETRAIN_WITH_CUDA=OFF)";
  std::map<std::string, const RankDevice*> by_gpu;
  for (const RankDevice& r : world) {
    if (!why_not.empty()) break;
    if (r.gpu_uuid.empty()) {
      why_not = absl::StrCat(r.name, "'s tensors are in host memory");
    } else if (auto [it, fresh] = by_gpu.emplace(r.gpu_uuid, &r); !fresh) {
      why_not = absl::StrCat(it->second->name, " and ", r.name, " share GPU ", r.gpu_uuid,
                             " (NCCL needs a GPU of its own for each rank)");
    }
  }
  if (why_not.empty() && !have_nccl_id) why_not = "rank 0 has no NCCL id";

  struct Candidate {
    const char* name;
    bool applies;
    std::string reason;
  };
  const Candidate candidates[] = {
      {"nccl", why_not.empty() && world.size() > 1, "every rank has a GPU of its own"},
      {"ring", true,
       world.size() == 1 ? "one rank: nothing to exchange"
       : why_not.empty() ? "NCCL applies, but the ring was asked for"
                         : why_not},
  };
  if (requested == "nccl") {
    if (!why_not.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("--allreduce-backend nccl: ", why_not));
    }
    return BackendChoice{"nccl", world.size() > 1 ? candidates[0].reason : "asked for"};
  }
  if (requested == "ring") return BackendChoice{"ring", "asked for"};
  for (const Candidate& c : candidates) {
    if (c.applies) return BackendChoice{c.name, c.reason};
  }
  return BackendChoice{"ring", candidates[1].reason};
}

absl::StatusOr<std::string> NewNcclUniqueId() {
#ifdef KUBETRAIN_WITH_CUDA
  return NcclCollective::NewUniqueId();
#else
  return absl::UnimplementedError("NCCL needs a build with KUBETRAIN_WITH_CUDA=ON");
#endif
}

absl::StatusOr<std::unique_ptr<DeviceCollective>> MakeNcclCollective(
    int rank, int world, const std::string& unique_id, ComputeDevice& device,
    const exchange::IoCheck& check) {
#ifdef KUBETRAIN_WITH_CUDA
  absl::StatusOr<std::unique_ptr<NcclCollective>> c =
      NcclCollective::Create(rank, world, unique_id, device, check);
  if (!c.ok()) return c.status();
  return std::unique_ptr<DeviceCollective>(std::move(*c));
#else
  (void)rank;
  (void)world;
  (void)unique_id;
  (void)device;
  (void)check;
  return absl::UnimplementedError("NCCL needs a build with KUBETRAIN_WITH_CUDA=ON");
#endif
}

}  // namespace kubetrain::allreduce
