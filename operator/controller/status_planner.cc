#include "operator/controller/status_planner.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "api/cluster_spec.h"
#include "api/failure_reason.h"
#include "api/labels.h"
#include "operator/controller/job_phase.h"
#include "operator/controller/pod_planner.h"
#include "operator/controller/pod_status.h"
#include "operator/kube/object.h"

namespace kubetrain::controller {

void ComputeReplicaStatuses(const api::TrainingJob& job, const ReplicaObjects& pods,
                            api::JobStatus& status) {
  for (const auto& [type, spec] : job.spec.replica_specs) {
    api::ReplicaStatus& rs = status.replica_statuses[type];
    int32_t active = 0, ready = 0, failed = 0;
    std::set<int32_t> completed = rs.completed_indexes;
    for (int i = 0; i < spec.Replicas(); ++i) {
      auto it = pods.find({type, i});
      if (it == pods.end()) continue;
      const kube::Json& pod = *it->second;
      const std::string phase = PodPhase(pod);
      if (phase == "Succeeded") {
        completed.insert(i);
      } else if (phase == "Failed") {
        ++failed;
      } else if (!kube::IsBeingDeleted(pod)) {
        ++active;
        if (PodReady(pod)) ++ready;
      }
    }
    rs.active = active;
    rs.ready = ready;
    rs.succeeded = static_cast<int32_t>(completed.size());
    rs.failed = failed;
    rs.selector = absl::StrCat(api::kLabelJobName, "=", job.metadata.name, ",",
                               api::kLabelReplicaType, "=", api::ReplicaTypeLower(type));
    rs.completed_indexes = std::move(completed);
  }
}

std::vector<api::ReplicaState> ReplicaStates(const api::TrainingJob& job,
                                             const ReplicaObjects& pods,
                                             const api::JobStatus& status) {
  std::vector<api::ReplicaState> states;
  for (const auto& [type, spec] : job.spec.replica_specs) {
    for (int i = 0; i < spec.Replicas(); ++i) {
      api::ReplicaState state;
      state.type = type;
      state.index = i;
      state.name = api::ReplicaName(job, type, i);
      auto it = pods.find({type, i});
      const bool has_pod = it != pods.end();
      state.phase = ReplicaPhaseOf(has_pod ? PodPhase(*it->second) : "",
                                   has_pod && kube::IsBeingDeleted(*it->second),
                                   !has_pod && ReplicaCompleted(pods, status, {type, i}));
      if (state.phase == api::ReplicaPhase::kSucceeded) {
        state.last_exit = api::ReplicaExit::Code(0);
      }
      states.push_back(state);
    }
  }
  return states;
}

bool RecordLastFailure(api::JobStatus& status, const FailedReplica& f, const std::string& now) {
  const std::optional<api::LastFailure>& last = status.last_failure;
  if (last && last->pod == f.pod_name && last->reason == api::FailureReasonName(f.reason) &&
      (f.pod_uid.empty() || last->pod_uid.empty() || last->pod_uid == f.pod_uid)) {
    return false;
  }
  api::LastFailure recorded;
  recorded.replica_type = f.type;
  recorded.replica_index = f.index;
  recorded.pod = f.pod_name;
  recorded.pod_uid = f.pod_uid;
  recorded.node = f.node;
  if (f.state.empty()) recorded.exit_code = f.exit.EffectiveCode();
  recorded.reason = api::FailureReasonName(f.reason);
  recorded.message = f.message;
  recorded.time = now;
  status.last_failure = std::move(recorded);
  return true;
}

bool RecordLastCheckpoint(api::JobStatus& status, const std::string& replica,
                          const api::CheckpointMessage& m, const std::string& now) {
  const std::optional<api::LastCheckpoint>& last = status.last_checkpoint;
  if (last && (last->step > m.step || (last->step == m.step && last->path == m.path))) {
    return false;
  }
  status.last_checkpoint = api::LastCheckpoint{m.step, replica, m.path, now};
  return true;
}

bool RecordStoppedPodCheckpoints(api::JobStatus& status, const ReplicaObjects& pods,
                                 const std::string& now) {
  bool changed = false;
  for (const auto& [key, pod] : pods) {
    std::optional<api::CheckpointMessage> m = StoppedPodCheckpoint(*pod);
    if (!m) continue;
    const std::string replica = absl::StrCat(api::ReplicaTypeLower(key.first), "-", key.second);
    changed = RecordLastCheckpoint(status, replica, *m, now) || changed;
  }
  return changed;
}

SuspendWait PodsStillStopping(const ReplicaObjects& pods, absl::Time now) {
  SuspendWait out;
  for (const auto& [key, pod] : pods) {
    const std::string phase = PodPhase(*pod);
    if (phase == "Succeeded" || phase == "Failed") continue;
    if (kube::IsBeingDeleted(*pod)) {
      // deletionTimestamp is the end of the grace period.
      std::optional<int64_t> us =
          kube::ParseTimeMicros(kube::StringAt(*pod, {"metadata", "deletionTimestamp"}));
      if (!us) continue;
      const absl::Time end = absl::FromUnixMicros(*us);
      if (now >= end) continue;
      if (!out.wait || end - now < *out.wait) out.wait = end - now;
    }
    out.pods.push_back(kube::Name(*pod));
  }
  return out;
}

}  // namespace kubetrain::controller
