#include "operator/controller/service_planner.h"

#include "api/cluster_spec.h"
#include "operator/kube/object.h"

namespace kubetrain::controller {

std::vector<ServiceToCreate> MissingServices(const api::TrainingJob& job,
                                             const JobObjects& objects) {
  std::vector<ServiceToCreate> out;
  if (job.spec.service_mode == api::ServiceMode::kPerJob) {
    if (objects.job_service == nullptr) out.push_back({job.metadata.name, std::nullopt});
    return out;
  }
  for (const auto& [type, spec] : job.spec.replica_specs) {
    for (int i = 0; i < spec.Replicas(); ++i) {
      if (objects.services.count({type, i})) continue;
      out.push_back({api::ReplicaName(job, type, i), ReplicaKey{type, i}});
    }
  }
  return out;
}

std::vector<kube::ObjectPtr> StrayServicesToDelete(const api::TrainingJob& job,
                                                   const JobObjects& objects) {
  std::vector<kube::ObjectPtr> out;
  // services is ordered by (type, index): walk it backwards per type.
  for (auto it = objects.services.rbegin(); it != objects.services.rend(); ++it) {
    const auto& [k, svc] = *it;
    if (k.second < job.ReplicaCount(k.first) || kube::IsBeingDeleted(*svc)) continue;
    out.push_back(svc);
  }
  return out;
}

}  // namespace kubetrain::controller
