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
nlohmann::json Lasting(const nlohmann::json& status) {
  if (!status.is_object()) return status;
  nlohmann::json out = status;
  out.erase("startTime");
  out.erase("lastReconcileTime");
  if (auto it = out.find("conditions"); it != out.end() && it->is_array()) {
    nlohmann::json kept = nlohmann::json::array();
    for (const nlohmann::json& c : *it) {
      if (!(c.is_object() && c.value("type", "") == "Created")) kept.push_back(c);
    }
    if (kept.empty()) {
      out.erase("conditions");
    } else {
      *it = std::move(kept);
    }
  }
  if (auto it = out.find("replicaStatuses"); it != out.end() && it->is_object()) {
    for (auto& [type, rs] : it->items()) {
      if (!rs.is_object()) continue;
      rs.erase("active");
      rs.erase("ready");
      rs.erase("selector");
      // A replica type first seen here has nothing lasting yet.
      for (const char* counter : {"succeeded", "failed", "restarts"}) {
        if (rs.contains(counter) && rs[counter] == 0) rs.erase(counter);
      }
    }
    nlohmann::json nonempty = nlohmann::json::object();
    for (auto& [type, rs] : it->items()) {
      if (!(rs.is_object() && rs.empty())) nonempty[type] = rs;
    }
    if (nonempty.empty()) {
      out.erase("replicaStatuses");
    } else {
      *it = std::move(nonempty);
    }
  }
  if (auto it = out.find("restartCount"); it != out.end() && *it == 0) out.erase(it);
  return out;
}

}  // namespace

bool StatusWriteCanWait(const nlohmann::json& stored, const nlohmann::json& computed) {
  return Lasting(stored) == Lasting(computed);
}

}  // namespace kubetrain::controller
