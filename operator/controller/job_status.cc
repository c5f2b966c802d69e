#include "operator/controller/job_status.h"

#include "operator/kube/object.h"

namespace kubetrain::controller {
namespace {

void SetTrue(Json& status, const std::string& type, const std::string& reason,
             const std::string& message, const std::string& now) {
  const bool value = true;
  if (!status.is_object()) status = Json::object();
  if (!status.contains("conditions") || !status["conditions"].is_array()) {
    status["conditions"] = Json::array();
  }
  Json& conditions = status["conditions"];
  const std::string value_str = value ? "True" : "False";
  Json updated{{"type", type},       {"status", value_str},   {"reason", reason},
               {"message", message}, {"lastUpdateTime", now}, {"lastTransitionTime", now}};
  for (size_t i = 0; i < conditions.size(); ++i) {
    Json& c = conditions[i];
    if (!c.is_object() || kube::StringAt(c, {"type"}) != type) continue;
    if (kube::StringAt(c, {"status"}) == value_str) {
      if (kube::StringAt(c, {"reason"}) == reason && kube::StringAt(c, {"message"}) == message)
        return;
      const std::string since = kube::StringAt(c, {"lastTransitionTime"});
      updated["lastTransitionTime"] = since.empty() ? now : since;
    }
    conditions.erase(i);
    break;
  }
  conditions.push_back(std::move(updated));
}

}  // namespace

const Json* FindCondition(const Json& status, const std::string& type) {
  if (!status.is_object() || !status.contains("conditions") || !status["conditions"].is_array()) {
    return nullptr;
  }
  for (const Json& c : status["conditions"]) {
    if (c.is_object() && kube::StringAt(c, {"type"}) == type) return &c;
  }
  return nullptr;
}

bool IsConditionTrue(const Json& status, const std::string& type) {
  const Json* c = FindCondition(status, type);
  return c != nullptr && kube::StringAt(*c, {"status"}) == "True";
}

void SetCondition(Json& status, const std::string& type, bool value, const std::string& reason,
                  const std::string& message, const std::string& now) {
  if (!value && FindCondition(status, type) == nullptr) return;  // nothing to turn off
  if (!value) {
    // Turning a condition off keeps its position: it is not the phase.
    Json& conditions = status["conditions"];
    for (Json& c : conditions) {
      if (!c.is_object() || kube::StringAt(c, {"type"}) != type) continue;
      if (kube::StringAt(c, {"status"}) == "False" && kube::StringAt(c, {"reason"}) == reason &&
          kube::StringAt(c, {"message"}) == message) {
        return;
      }
      if (kube::StringAt(c, {"status"}) != "False") c["lastTransitionTime"] = now;
      c["status"] = "False";
      c["reason"] = reason;
      c["message"] = message;
      c["lastUpdateTime"] = now;
      return;
    }
    return;
  }
  if (type == kCondSucceeded || type == kCondFailed) {
    SetCondition(status, kCondRunning, false, type == kCondSucceeded ? "JobSucceeded" : "JobFailed",
                 "", now);
    SetCondition(status, kCondRestarting, false,
                 type == kCondSucceeded ? "JobSucceeded" : "JobFailed", "", now);
    // A job that stalled, or waited for nodes, and then succeeded does so no
    // more (one that failed keeps them: they may say why).
    if (type == kCondSucceeded) SetCondition(status, kCondStalled, false, "JobSucceeded", "", now);
    if (type == kCondSucceeded) {
      SetCondition(status, kCondUnschedulable, false, "JobSucceeded", "", now);
    }
  } else if (type == kCondRunning) {
    SetCondition(status, kCondRestarting, false, "JobRunning", "", now);
  } else if (type == kCondRestarting) {
    SetCondition(status, kCondRunning, false, "JobRestarting", "", now);
  }
  SetTrue(status, type, reason, message, now);
}

bool IsFinished(const Json& status) {
  return IsConditionTrue(status, kCondSucceeded) || IsConditionTrue(status, kCondFailed);
}

std::string Phase(const Json& status) {
  if (!status.is_object() || !status.contains("conditions") || !status["conditions"].is_array()) {
    return "";
  }
  const Json& conditions = status["conditions"];
  for (auto it = conditions.rbegin(); it != conditions.rend(); ++it) {
    if (it->is_object() && kube::StringAt(*it, {"status"}) == "True")
      return kube::StringAt(*it, {"type"});
  }
  return "";
}

}  // namespace kubetrain::controller
