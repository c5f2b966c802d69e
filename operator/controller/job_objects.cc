#include "operator/controller/job_objects.h"

#include <optional>

#include "absl/strings/numbers.h"
#include "api/labels.h"
#include "operator/kube/object.h"

namespace kubetrain::controller {
namespace {

std::optional<ReplicaKey> ReplicaOf(const kube::Json& o) {
  std::optional<api::ReplicaType> type =
      api::ParseReplicaType(kube::Label(o, api::kLabelReplicaType));
  int i = 0;
  if (!type || !absl::SimpleAtoi(kube::Label(o, api::kLabelReplicaIndex), &i)) {
    return std::nullopt;
  }
  return ReplicaKey{*type, i};
}

}  // namespace

JobObjects CollectJobObjects(const api::TrainingJob& job, const std::string& uid,
                             const kube::ObjectCache& pods, const kube::ObjectCache& services) {
  JobObjects out;
  for (const kube::ObjectPtr& pod : pods.ByIndex(kube::kIndexOwnerUid, uid)) {
    if (kube::ControllerUid(*pod) != uid) continue;
    std::optional<ReplicaKey> k = ReplicaOf(*pod);
    if (k && k->second < job.ReplicaCount(k->first)) {
      out.pods[*k] = pod;
    } else {
      out.stray_pods.push_back(pod);
    }
  }
  for (const kube::ObjectPtr& svc : services.ByIndex(kube::kIndexOwnerUid, uid)) {
    if (kube::ControllerUid(*svc) != uid) continue;
    if (std::optional<ReplicaKey> k = ReplicaOf(*svc)) {
      out.services[*k] = svc;
    } else if (kube::Name(*svc) == job.metadata.name) {
      out.job_service = svc;
    }
  }
  return out;
}

}  // namespace kubetrain::controller
