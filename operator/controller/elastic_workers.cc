#include "operator/controller/elastic_workers.h"

#include "absl/strings/str_cat.h"
#include "operator/controller/pod_status.h"
#include "operator/kube/object.h"

namespace kubetrain::controller {

int RunningWorkers(const ReplicaObjects& pods) {
  int running = 0;
  for (const auto& [k, pod] : pods) {
    if (k.first != api::ReplicaType::kWorker) continue;
    if (PodPhase(*pod) == "Running" && !kube::IsBeingDeleted(*pod)) ++running;
  }
  return running;
}

std::optional<std::string> WaitingMessage(const api::TrainingJob& job, const ReplicaObjects& pods) {
  if (!job.spec.elastic_policy) return std::nullopt;
  const int min = job.spec.elastic_policy->min_replicas;
  const int running = RunningWorkers(pods);
  if (running >= min) return std::nullopt;
  const int needed = min - running;
  return absl::StrCat("needs ", needed, " more worker", needed == 1 ? "" : "s", ": ", running,
                      " of minReplicas ", min, " running");
}

std::string ScaleRefusedMessage(const api::ElasticClamp& clamp) {
  return absl::StrCat("spec.replicaSpecs.Worker.replicas ", api::ElasticBoundMessage(clamp),
                      ": running ", clamp.allowed, " worker", clamp.allowed == 1 ? "" : "s");
}

}  // namespace kubetrain::controller
