#include "operator/controller/pod_planner.h"

#include "api/cluster_spec.h"
#include "operator/controller/pod_status.h"
#include "operator/kube/object.h"

namespace kubetrain::controller {

bool ReplicaCompleted(const ReplicaObjects& pods, const api::JobStatus& status, ReplicaKey k) {
  auto it = pods.find(k);
  if (it != pods.end() && PodPhase(*it->second) == "Succeeded") return true;
  auto rs = status.replica_statuses.find(k.first);
  return rs != status.replica_statuses.end() && rs->second.completed_indexes.count(k.second) > 0;
}

std::vector<PodToCreate> MissingPods(const api::TrainingJob& job, const ReplicaObjects& pods,
                                     const api::JobStatus& status) {
  std::vector<PodToCreate> out;
  for (const auto& [type, spec] : job.spec.replica_specs) {
    for (int i = 0; i < spec.Replicas(); ++i) {
      const ReplicaKey k{type, i};
      if (pods.count(k)) continue;
      if (ReplicaCompleted(pods, status, k)) continue;  // never run again
      out.push_back({k, api::ReplicaName(job, type, i)});
    }
  }
  return out;
}

std::vector<kube::ObjectPtr> StrayPodsToDelete(const JobObjects& objects) {
  std::vector<kube::ObjectPtr> out;
  for (const kube::ObjectPtr& pod : objects.stray_pods) {
    if (!kube::IsBeingDeleted(*pod)) out.push_back(pod);
  }
  return out;
}

std::vector<CleanUpItem> PodsToCleanUp(api::CleanPodPolicy policy, const JobObjects& objects) {
  std::vector<CleanUpItem> out;
  if (policy == api::CleanPodPolicy::kNone) return out;
  for (const auto& [k, pod] : objects.pods) {
    if (kube::IsBeingDeleted(*pod)) continue;
    const std::string phase = PodPhase(*pod);
    const bool finished = phase == "Succeeded" || phase == "Failed";
    if (policy == api::CleanPodPolicy::kRunning && finished) continue;
    auto svc = objects.services.find(k);
    out.push_back({pod, svc == objects.services.end() ? nullptr : svc->second});
  }
  for (const kube::ObjectPtr& pod : StrayPodsToDelete(objects)) out.push_back({pod, nullptr});
  return out;
}

std::vector<kube::ObjectPtr> PodsToSuspend(const ReplicaObjects& pods) {
  std::vector<kube::ObjectPtr> out;
  for (const auto& [k, pod] : pods) {
    if (!kube::IsBeingDeleted(*pod) && PodPhase(*pod) != "Succeeded") out.push_back(pod);
  }
  return out;
}

}  // namespace kubetrain::controller
