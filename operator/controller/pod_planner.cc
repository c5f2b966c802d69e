#include "operator/controller/pod_planner.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "api/cluster_spec.h"
#include "api/labels.h"
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
  // (has no replica labels, type, -index, name): scaled-down replicas by
  // type, highest index first, then pods without replica labels.
  using Order = std::tuple<bool, int, int, std::string>;
  std::vector<std::pair<Order, kube::ObjectPtr>> found;
  for (const kube::ObjectPtr& pod : objects.stray_pods) {
    if (kube::IsBeingDeleted(*pod)) continue;
    std::optional<api::ReplicaType> type =
        api::ParseReplicaType(kube::Label(*pod, api::kLabelReplicaType));
    int index = 0;
    const bool labelled =
        type.has_value() && absl::SimpleAtoi(kube::Label(*pod, api::kLabelReplicaIndex), &index);
    found.push_back({Order{!labelled, labelled ? static_cast<int>(*type) : 0, labelled ? -index : 0,
                           kube::Name(*pod)},
                     pod});
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<kube::ObjectPtr> out;
  for (auto& [order, pod] : found) out.push_back(std::move(pod));
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
