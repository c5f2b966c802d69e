#include "tools/kubectl_kubetrain/job_state.h"

namespace kubetrain::kubectl_plugin {

api::JobStatus JobStatusOf(const nlohmann::json& job) {
  if (!job.is_object()) return api::JobStatus{};
  auto it = job.find("status");
  if (it == job.end()) return api::JobStatus{};
  absl::StatusOr<api::JobStatus> status = api::StatusFromJson(*it);
  return status.ok() ? *std::move(status) : api::JobStatus{};
}

std::string JobPhase(const nlohmann::json& job) {
  const std::string phase = api::Phase(JobStatusOf(job));
  return phase.empty() ? "Pending" : phase;
}

bool JobFinished(const nlohmann::json& job) {
  const std::string phase = JobPhase(job);
  return phase == "Succeeded" || phase == "Failed";
}

}  // namespace kubetrain::kubectl_plugin
