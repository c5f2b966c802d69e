#include "operator/controller/failed_replicas.h"

#include <string>
#include <tuple>
#include <utility>

#include "api/failure_reason.h"
#include "operator/controller/node_loss.h"
#include "operator/controller/pod_status.h"
#include "operator/kube/object.h"

namespace kubetrain::controller {
namespace {

void SetFailureFields(FailedReplica& f, const PodFailure& p) {
  f.exit = p.exit;
  f.detail = p.detail;
  f.reason = p.reason;
  f.node = p.node;
  f.message = p.message;
}

void Soonest(std::optional<absl::Duration>& wait, const std::optional<absl::Duration>& other) {
  if (other && (!wait || *other < *wait)) wait = other;
}

}  // namespace

std::optional<absl::Duration> NodeLostTimeout(const api::RunPolicy& run_policy,
                                              bool nodes_watched) {
  if (!nodes_watched) return std::nullopt;
  const int64_t s =
      run_policy.node_lost_timeout_seconds.value_or(api::kDefaultNodeLostTimeoutSeconds);
  if (s <= 0) return std::nullopt;
  return absl::Seconds(s);
}

FailedReplicas FindFailedReplicas(const api::TrainingJob& job, const ReplicaObjects& pods,
                                  const api::JobStatus& status, const kube::ObjectCache* nodes,
                                  std::optional<absl::Duration> node_lost_timeout, absl::Time now) {
  FailedReplicas out;
  auto add = [&](FailedReplica f, const kube::ObjectPtr& pod, bool force) {
    out.failed.push_back(std::move(f));
    out.pods.push_back(pod);
    out.force.push_back(force);
  };
  // The uid of the pod lastFailure names (a deleting pod is decided once).
  const std::string last_uid = status.last_failure ? status.last_failure->pod_uid : "";
  for (const auto& [k, pod] : pods) {
    FailedReplica f;
    std::tie(f.type, f.index) = k;
    f.pod_name = kube::Name(*pod);
    f.pod_uid = kube::Uid(*pod);
    f.policy = job.Find(f.type)->Restart();
    if (kube::IsBeingDeleted(*pod)) {
      // Deleted by the control plane for a disruption (the scheduler's
      // preemption, an eviction, the taint manager), said by its
      // DisruptionTarget condition: decided once (lastFailure keeps the
      // pod's uid), and recreated once it is gone.
      const PodFailure p = ClassifyFailedPod(*pod);
      if (!api::IsDisruption(p.reason) || !HasDisruptionTarget(*pod)) continue;
      if (last_uid == f.pod_uid) continue;
      SetFailureFields(f, p);
      f.deleting = true;
      f.state = "is being deleted by the control plane";
      add(std::move(f), pod, /*force=*/false);
      continue;
    }
    if (node_lost_timeout && nodes != nullptr) {
      const std::string node_name = kube::StringAt(*pod, {"spec", "nodeName"});
      const kube::ObjectPtr node = node_name.empty() ? nullptr : nodes->Get(node_name);
      const NodeLossCheck check = CheckNodeLoss(*pod, node.get(), *node_lost_timeout, now);
      Soonest(out.wait, check.wait);
      if (check.lost) {
        SetFailureFields(f, *check.lost);
        f.state = "was lost with its node";
        add(std::move(f), pod, /*force=*/true);
        continue;
      }
    }
    if (PodPhase(*pod) != "Failed") {
      // A container that waits for what will not come by itself (an
      // image, a Secret) is reported, once, but left to the kubelet.
      if (std::optional<PodFailure> stuck = StuckPodFailure(*pod)) {
        SetFailureFields(f, *stuck);
        out.stuck.push_back(std::move(f));
      }
      continue;
    }
    SetFailureFields(f, ClassifyFailedPod(*pod));
    add(std::move(f), pod, /*force=*/false);
  }
  return out;
}

StuckTerminating FindStuckTerminating(const ReplicaObjects& pods, absl::Duration timeout,
                                      absl::Time now) {
  StuckTerminating out;
  for (const auto& [k, pod] : pods) {
    if (!kube::IsBeingDeleted(*pod)) continue;
    const NodeLossCheck check = CheckNodeLoss(*pod, nullptr, timeout, now);
    Soonest(out.wait, check.wait);
    if (check.stuck_terminating) out.pods.push_back(pod);
  }
  return out;
}

}  // namespace kubetrain::controller
