#include "tools/kubectl_kubetrain/job_state.h"

#include "operator/kube/object.h"

namespace kubetrain::kubectl_plugin {

std::string JobPhase(const nlohmann::json& job) {
  std::string phase = "Pending";
  if (!job.is_object() || !job.contains("status") || !job["status"].is_object()) return phase;
  auto conditions = job["status"].find("conditions");
  if (conditions == job["status"].end() || !conditions->is_array()) return phase;
  for (const nlohmann::json& c : *conditions) {
    if (kube::StringAt(c, {"status"}) == "True") phase = kube::StringAt(c, {"type"});
  }
  return phase;
}

bool JobFinished(const nlohmann::json& job) {
  const std::string phase = JobPhase(job);
  return phase == "Succeeded" || phase == "Failed";
}

}  // namespace kubetrain::kubectl_plugin
