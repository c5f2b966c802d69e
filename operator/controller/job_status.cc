#include "operator/controller/job_status.h"

#include <algorithm>

namespace kubetrain::controller {
namespace {

using api::Condition;
using api::ConditionStatus;

void SetTrue(api::JobStatus& status, const std::string& type, const std::string& reason,
             const std::string& message, const std::string& now) {
  Condition updated{type, ConditionStatus::kTrue, reason, message, now, now};
  auto it = std::find_if(status.conditions.begin(), status.conditions.end(),
                         [&](const Condition& c) { return c.type == type; });
  if (it != status.conditions.end()) {
    if (it->status == ConditionStatus::kTrue) {
      if (it->reason == reason && it->message == message) return;
      if (!it->last_transition_time.empty()) {
        updated.last_transition_time = it->last_transition_time;
      }
    }
    status.conditions.erase(it);
  }
  status.conditions.push_back(std::move(updated));
}

}  // namespace

void SetCondition(api::JobStatus& status, const std::string& type, bool value,
                  const std::string& reason, const std::string& message, const std::string& now) {
  if (!value) {
    // Turning a condition off keeps its position: it is not the phase.
    for (Condition& c : status.conditions) {
      if (c.type != type) continue;
      if (c.status == ConditionStatus::kFalse && c.reason == reason && c.message == message) {
        return;
      }
      if (c.status != ConditionStatus::kFalse) c.last_transition_time = now;
      c.status = ConditionStatus::kFalse;
      c.reason = reason;
      c.message = message;
      c.last_update_time = now;
      return;
    }
    return;  // nothing to turn off
  }
  if (type == kCondSucceeded || type == kCondFailed) {
    SetCondition(status, kCondRunning, false, type == kCondSucceeded ? "JobSucceeded" : "JobFailed",
                 "", now);
    SetCondition(status, kCondRestarting, false,
                 type == kCondSucceeded ? "JobSucceeded" : "JobFailed", "", now);
    // A job that stalled, or waited for nodes, and then succeeded does so no
    // more (one that failed keeps them: they may say why).
    if (type == kCondSucceeded) {
      SetCondition(status, kCondStalled, false, "JobSucceeded", "", now);
      SetCondition(status, kCondUnschedulable, false, "JobSucceeded", "", now);
    }
    // A finished job waits for no workers.
    SetCondition(status, kCondWaiting, false, type == kCondSucceeded ? "JobSucceeded" : "JobFailed",
                 "", now);
  } else if (type == kCondRunning) {
    SetCondition(status, kCondRestarting, false, "JobRunning", "", now);
  } else if (type == kCondRestarting) {
    SetCondition(status, kCondRunning, false, "JobRestarting", "", now);
  }
  SetTrue(status, type, reason, message, now);
}

bool IsFinished(const api::JobStatus& status) {
  return IsConditionTrue(status, kCondSucceeded) || IsConditionTrue(status, kCondFailed);
}

}  // namespace kubetrain::controller
