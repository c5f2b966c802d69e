#include "operator/controller/pod_status.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "api/exit_codes.h"
#include "operator/kube/object.h"

namespace kubetrain::controller {

std::string PodPhase(const kube::Json& pod) { return kube::StringAt(pod, {"status", "phase"}); }

bool PodReady(const kube::Json& pod) {
  const kube::Json* conditions = nullptr;
  if (pod.contains("status") && pod["status"].is_object() && pod["status"].contains("conditions")) {
    conditions = &pod["status"]["conditions"];
  }
  if (conditions == nullptr || !conditions->is_array()) return false;
  for (const kube::Json& c : *conditions) {
    if (kube::StringAt(c, {"type"}) == "Ready" && kube::StringAt(c, {"status"}) == "True") {
      return true;
    }
  }
  return false;
}

int ContainerRestarts(const kube::Json& pod) {
  int total = 0;
  if (!pod.contains("status") || !pod["status"].is_object()) return 0;
  const kube::Json& st = pod["status"];
  if (!st.contains("containerStatuses") || !st["containerStatuses"].is_array()) return 0;
  for (const kube::Json& c : st["containerStatuses"]) {
    if (c.contains("restartCount") && c["restartCount"].is_number_integer()) {
      total += c["restartCount"].get<int>();
    }
  }
  return total;
}

api::ReplicaExit FailedPodExit(const kube::Json& pod, std::string* detail) {
  std::string container_name;
  if (pod.contains("spec") && pod["spec"].contains("containers") &&
      pod["spec"]["containers"].is_array() && !pod["spec"]["containers"].empty()) {
    container_name = kube::StringAt(pod["spec"]["containers"][0], {"name"});
  }
  const kube::Json& st = pod.contains("status") ? pod["status"] : kube::Json::object();
  if (st.is_object() && st.contains("containerStatuses") && st["containerStatuses"].is_array()) {
    for (const kube::Json& c : st["containerStatuses"]) {
      if (!container_name.empty() && kube::StringAt(c, {"name"}) != container_name) continue;
      for (const char* which : {"state", "lastState"}) {
        if (c.contains(which) && c[which].is_object() && c[which].contains("terminated")) {
          const kube::Json& t = c[which]["terminated"];
          const int code = static_cast<int>(kube::IntAt(t, {"exitCode"}, 1));
          const std::string reason = kube::StringAt(t, {"reason"});
          *detail = reason.empty() ? "" : absl::StrCat(" (", reason, ")");
          return api::ReplicaExit::Code(code);
        }
      }
    }
  }
  std::string reason = kube::StringAt(pod, {"status", "reason"});
  if (reason == "Evicted" || reason == "Preempting" || reason == "Shutdown" ||
      reason == "NodeShutdown" || reason == "Terminated" || reason == "NodeLost") {
    *detail = absl::StrCat(" (pod ", reason, ")");
    return api::ReplicaExit::Code(137);
  }
  *detail = reason.empty() ? " (no exit code reported)" : absl::StrCat(" (pod ", reason, ")");
  return api::ReplicaExit::Code(1);
}

namespace {

// The end of `m`, at most PodFailure::kMaxMessage bytes, trimmed.
std::string Clip(std::string m) {
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  if (m.size() > PodFailure::kMaxMessage) {
    m = absl::StrCat("...", m.substr(m.size() - PodFailure::kMaxMessage + 3));
  }
  return m;
}

// The replica container's status (the first container's name), or null.
const kube::Json* ReplicaContainerStatus(const kube::Json& pod) {
  std::string name;
  if (pod.contains("spec") && pod["spec"].is_object() && pod["spec"].contains("containers") &&
      pod["spec"]["containers"].is_array() && !pod["spec"]["containers"].empty()) {
    name = kube::StringAt(pod["spec"]["containers"][0], {"name"});
  }
  if (!pod.contains("status") || !pod["status"].is_object()) return nullptr;
  const kube::Json& st = pod["status"];
  if (!st.contains("containerStatuses") || !st["containerStatuses"].is_array()) return nullptr;
  for (const kube::Json& c : st["containerStatuses"]) {
    if (name.empty() || kube::StringAt(c, {"name"}) == name) return &c;
  }
  return nullptr;
}

// The DisruptionTarget condition when it is True.
const kube::Json* DisruptionTarget(const kube::Json& pod) {
  if (!pod.contains("status") || !pod["status"].is_object() ||
      !pod["status"].contains("conditions") || !pod["status"]["conditions"].is_array()) {
    return nullptr;
  }
  for (const kube::Json& c : pod["status"]["conditions"]) {
    if (kube::StringAt(c, {"type"}) == "DisruptionTarget" &&
        kube::StringAt(c, {"status"}) == "True") {
      return &c;
    }
  }
  return nullptr;
}

}  // namespace

bool HasDisruptionTarget(const kube::Json& pod) { return DisruptionTarget(pod) != nullptr; }

std::optional<api::CheckpointMessage> StoppedPodCheckpoint(const kube::Json& pod) {
  const kube::Json* container = ReplicaContainerStatus(pod);
  if (container == nullptr) return std::nullopt;
  for (const char* which : {"state", "lastState"}) {
    if (!container->contains(which) || !(*container)[which].is_object() ||
        !(*container)[which].contains("terminated")) {
      continue;
    }
    const std::string message = kube::StringAt((*container)[which]["terminated"], {"message"});
    if (std::optional<api::CheckpointMessage> m = api::ParseCheckpointMessage(message)) return m;
  }
  return std::nullopt;
}

PodFailure ClassifyFailedPod(const kube::Json& pod) {
  using api::FailureReason;
  PodFailure f;
  f.exit = FailedPodExit(pod, &f.detail);
  f.node = kube::StringAt(pod, {"spec", "nodeName"});
  const kube::Json* container = ReplicaContainerStatus(pod);
  const kube::Json* terminated = nullptr;
  if (container != nullptr) {
    for (const char* which : {"state", "lastState"}) {
      if (container->contains(which) && (*container)[which].is_object() &&
          (*container)[which].contains("terminated")) {
        terminated = &(*container)[which]["terminated"];
        break;
      }
    }
  }
  const std::string termination_message =
      terminated != nullptr ? kube::StringAt(*terminated, {"message"}) : "";
  // The control plane's word first: a disruption ends the container too.
  if (const kube::Json* d = DisruptionTarget(pod)) {
    const std::string why = kube::StringAt(*d, {"reason"});
    f.reason = absl::StartsWith(why, "Preemption") ? FailureReason::kPreempted
               : why == "DeletionByTaintManager" || why == "DeletionByPodGC"
                   ? FailureReason::kNodeLost
                   : FailureReason::kEvicted;
    f.message = Clip(kube::StringAt(*d, {"message"}));
    return f;
  }
  const std::string pod_reason = kube::StringAt(pod, {"status", "reason"});
  const std::string pod_message = kube::StringAt(pod, {"status", "message"});
  if (pod_reason == "Evicted" || pod_reason == "Preempting" || pod_reason == "NodeLost" ||
      pod_reason == "Shutdown" || pod_reason == "NodeShutdown" || pod_reason == "Terminated" ||
      pod_reason == "DeadlineExceeded") {
    f.reason = pod_reason == "Evicted"            ? FailureReason::kEvicted
               : pod_reason == "Preempting"       ? FailureReason::kPreempted
               : pod_reason == "DeadlineExceeded" ? FailureReason::kDeadlineExceeded
                                                  : FailureReason::kNodeLost;
    f.message = Clip(pod_message);
    return f;
  }
  f.message = Clip(!termination_message.empty() ? termination_message : pod_message);
  const int code = f.exit.EffectiveCode();
  if (terminated != nullptr && kube::StringAt(*terminated, {"reason"}) == "OOMKilled") {
    f.reason = FailureReason::kOomKilled;
  } else if (code == kExitPeerLost) {
    f.reason = FailureReason::kLostPeer;
  } else if (code >= 1 && code <= 127 &&
             termination_message.find(api::kRuntimeErrorPrefix) != std::string::npos) {
    f.reason = FailureReason::kConfigError;
  }
  return f;
}

std::optional<PodFailure> StuckPodFailure(const kube::Json& pod) {
  const kube::Json* container = ReplicaContainerStatus(pod);
  if (container == nullptr || !container->contains("state") || !(*container)["state"].is_object() ||
      !(*container)["state"].contains("waiting")) {
    return std::nullopt;
  }
  const kube::Json& waiting = (*container)["state"]["waiting"];
  const std::string why = kube::StringAt(waiting, {"reason"});
  PodFailure f;
  if (why == "ImagePullBackOff" || why == "ErrImagePull" || why == "InvalidImageName") {
    f.reason = api::FailureReason::kImagePullBackOff;
  } else if (why == "CreateContainerConfigError") {
    f.reason = api::FailureReason::kCreateContainerConfigError;
  } else {
    return std::nullopt;
  }
  f.node = kube::StringAt(pod, {"spec", "nodeName"});
  f.detail = absl::StrCat(" (", why, ")");
  f.message = Clip(kube::StringAt(waiting, {"message"}));
  return f;
}

}  // namespace kubetrain::controller
