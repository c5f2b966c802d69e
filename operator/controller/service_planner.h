// Which Services a TrainingJob lacks: a headless Service per replica
// (`<job>-<type>-<index>`, serviceMode PerReplica, TFJob's) or one named as
// the job (serviceMode PerJob). A pure decision over the observed objects
// (job_objects.h); the reconciler builds them (replica_builder.h), records
// its expectations and creates them. Stateless and thread-safe.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_SERVICE_PLANNER_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_SERVICE_PLANNER_H_

#include <optional>
#include <string>
#include <vector>

#include "api/training_job.h"
#include "operator/controller/job_objects.h"

namespace kubetrain::controller {

struct ServiceToCreate {
  std::string name;
  std::optional<ReplicaKey> replica;  // unset: the job's own Service (PerJob)
};

// In replica order (types as the spec sorts them, then index).
std::vector<ServiceToCreate> MissingServices(const api::TrainingJob& job,
                                             const JobObjects& objects);

// Per-replica Services of indexes beyond the spec's replicas (a scale-down)
// not being deleted yet, highest index first.
std::vector<kube::ObjectPtr> StrayServicesToDelete(const api::TrainingJob& job,
                                                   const JobObjects& objects);

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_SERVICE_PLANNER_H_
