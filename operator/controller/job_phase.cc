#include "operator/controller/job_phase.h"

#include "absl/strings/str_cat.h"

namespace kubetrain::controller {
namespace {

TimeLimit Limit(absl::Time end, absl::Time now) {
  TimeLimit limit;
  if (now >= end) {
    limit.passed = true;
  } else {
    limit.wait = end - now;
  }
  return limit;
}

}  // namespace

TimeLimit ActiveDeadline(const api::RunPolicy& run_policy, absl::Time start, absl::Time now) {
  if (!run_policy.active_deadline_seconds) return {};
  return Limit(start + absl::Seconds(*run_policy.active_deadline_seconds), now);
}

std::string DeadlineExceededMessage(const std::string& job_name, int64_t deadline_seconds) {
  return absl::StrCat("TrainingJob ", job_name, " has run past its activeDeadlineSeconds (",
                      deadline_seconds, " s)");
}

TimeLimit TtlAfterFinished(const api::RunPolicy& run_policy, absl::Time completed, absl::Time now) {
  if (!run_policy.ttl_seconds_after_finished) return {};
  return Limit(completed + absl::Seconds(*run_policy.ttl_seconds_after_finished), now);
}

api::ReplicaPhase ReplicaPhaseOf(const std::string& pod_phase, bool deleting, bool completed) {
  if (pod_phase == "Succeeded" || (pod_phase.empty() && completed)) {
    return api::ReplicaPhase::kSucceeded;
  }
  if (pod_phase == "Running" && !deleting) return api::ReplicaPhase::kRunning;
  return api::ReplicaPhase::kPending;
}

PhaseDecision DecidePhase(const api::TrainingJob& job,
                          const std::vector<api::ReplicaState>& replicas, bool restarting) {
  const std::string& name = job.metadata.name;
  const api::JobOutcome outcome = api::DecideJobOutcome(
      job.spec.success_policy, job.ReplicaCount(api::ReplicaType::kChief) > 0, replicas);
  PhaseDecision d;
  if (outcome.phase == api::JobPhase::kSucceeded) {
    d.kind = PhaseDecision::Kind::kSucceeded;
    d.reason = "JobSucceeded";
    d.message = absl::StrCat("TrainingJob ", name, " successfully completed.",
                             outcome.message.empty() ? "" : absl::StrCat(" ", outcome.message));
    return d;
  }
  if (outcome.phase == api::JobPhase::kFailed) {
    d.kind = PhaseDecision::Kind::kFailed;
    d.reason = outcome.reason.empty() ? "ReplicaFailed" : outcome.reason;
    d.message = outcome.message;
    return d;
  }
  if (restarting) {
    d.kind = PhaseDecision::Kind::kRestarting;
    d.reason = "JobRestarting";
    d.message = absl::StrCat("TrainingJob ", name, " is restarting because ",
                             "one or more replicas failed or restarted.");
    return d;
  }
  bool all_running = true;
  bool any_running = false;
  for (const api::ReplicaState& r : replicas) {
    if (r.phase == api::ReplicaPhase::kRunning) any_running = true;
    if (r.phase == api::ReplicaPhase::kPending) all_running = false;
  }
  if (all_running && any_running) {
    d.kind = PhaseDecision::Kind::kRunning;
    d.reason = "JobRunning";
    d.message = absl::StrCat("TrainingJob ", name, " is running.");
  }
  return d;
}

namespace {

// `status` without what StatusWriteCanWait lets wait.
api::JobStatus Lasting(api::JobStatus status) {
  status.start_time.clear();
  status.last_reconcile_time.clear();
  std::erase_if(status.conditions,
                [](const api::Condition& c) { return c.type == api::kCondCreated; });
  for (auto& [type, rs] : status.replica_statuses) {
    rs.active = 0;
    rs.ready = 0;
    rs.selector.clear();
  }
  // A replica type first seen here has nothing lasting yet.
  std::erase_if(status.replica_statuses,
                [](const auto& entry) { return entry.second == api::ReplicaStatus{}; });
  if (status.restart_count == 0) status.restart_count.reset();
  return status;
}

}  // namespace

bool StatusWriteCanWait(const api::JobStatus& stored, const api::JobStatus& computed) {
  return Lasting(stored) == Lasting(computed);
}

}  // namespace kubetrain::controller
