#include "operator/controller/pod_status.h"

#include "absl/strings/str_cat.h"
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

}  // namespace kubetrain::controller
