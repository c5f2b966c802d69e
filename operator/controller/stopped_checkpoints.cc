#include "operator/controller/stopped_checkpoints.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "api/labels.h"
#include "operator/controller/pod_status.h"

namespace kubetrain::controller {

void StoppedCheckpoints::Observe(const std::string& job_key, const kube::Json& pod) {
  std::optional<api::CheckpointMessage> m = StoppedPodCheckpoint(pod);
  if (!m) return;
  const std::string type = kube::Label(pod, api::kLabelReplicaType);
  const std::string index = kube::Label(pod, api::kLabelReplicaIndex);
  if (type.empty() || index.empty()) return;
  const std::string replica = absl::StrCat(type, "-", index);
  absl::MutexLock l(&mu_);
  auto& kept = by_job_[job_key];
  auto it = kept.find(replica);
  if (it == kept.end() || it->second.step <= m->step) kept[replica] = *std::move(m);
}

std::map<std::string, api::CheckpointMessage> StoppedCheckpoints::Get(
    const std::string& job_key) const {
  absl::MutexLock l(&mu_);
  auto it = by_job_.find(job_key);
  if (it == by_job_.end()) return {};
  return it->second;
}

void StoppedCheckpoints::Forget(const std::string& job_key) {
  absl::MutexLock l(&mu_);
  by_job_.erase(job_key);
}

}  // namespace kubetrain::controller
