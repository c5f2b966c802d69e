#include "tools/kubectl_kubetrain/replica_ref.h"

#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/labels.h"
#include "api/training_job.h"
#include "operator/kube/object.h"

namespace kubetrain::kubectl_plugin {
namespace {

int TypeOrder(const std::string& type) {
  if (type == "chief") return 0;
  if (type == "ps") return 1;
  if (type == "worker") return 2;
  if (type == "evaluator") return 3;
  return 4;
}

}  // namespace

bool ReplicaRef::operator<(const ReplicaRef& other) const {
  return std::make_tuple(TypeOrder(type), type, index) <
         std::make_tuple(TypeOrder(other.type), other.type, other.index);
}

std::string ReplicaName(const ReplicaRef& replica) {
  return absl::StrCat(replica.type, "-", replica.index);
}

absl::StatusOr<ReplicaRef> ParseReplicaName(absl::string_view text) {
  const size_t dash = text.rfind('-');
  int index = -1;
  std::optional<api::ReplicaType> type;
  if (dash != absl::string_view::npos) {
    type = api::ParseReplicaType(std::string(text.substr(0, dash)));
    if (!absl::SimpleAtoi(text.substr(dash + 1), &index)) index = -1;
  }
  if (!type || index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("replica \"", text,
                     "\" is not <type>-<index> with type chief, ps, worker or evaluator "
                     "(e.g. worker-3)"));
  }
  return ReplicaRef{api::ReplicaTypeLower(*type), index};
}

std::optional<ReplicaRef> ReplicaOfPod(const nlohmann::json& pod) {
  const std::string type = kube::Label(pod, api::kLabelReplicaType);
  int index = -1;
  if (type.empty() || !absl::SimpleAtoi(kube::Label(pod, api::kLabelReplicaIndex), &index) ||
      index < 0) {
    return std::nullopt;
  }
  return ReplicaRef{absl::AsciiStrToLower(type), index};
}

std::string JobPodSelector(absl::string_view job) {
  return absl::StrCat(api::kLabelJobName, "=", job);
}

std::optional<PodView> ViewOfPod(const nlohmann::json& pod, absl::string_view container) {
  std::optional<ReplicaRef> replica = ReplicaOfPod(pod);
  if (!replica) return std::nullopt;
  PodView view;
  view.replica = *replica;
  view.pod = kube::Name(pod);
  view.uid = kube::Uid(pod);
  view.phase = kube::StringAt(pod, {"status", "phase"});
  view.being_deleted = kube::IsBeingDeleted(pod);
  view.container = std::string(container);
  if (view.container.empty()) {
    const nlohmann::json* containers = nullptr;
    if (pod.contains("spec") && pod["spec"].is_object()) {
      auto it = pod["spec"].find("containers");
      if (it != pod["spec"].end() && it->is_array()) containers = &*it;
    }
    if (containers == nullptr || containers->empty()) return std::nullopt;
    view.container = kube::StringAt((*containers)[0], {"name"});
    if (view.container.empty()) return std::nullopt;
  }
  if (pod.contains("status") && pod["status"].is_object()) {
    auto statuses = pod["status"].find("containerStatuses");
    if (statuses != pod["status"].end() && statuses->is_array()) {
      for (const nlohmann::json& status : *statuses) {
        if (kube::StringAt(status, {"name"}) != view.container) continue;
        view.restarts = static_cast<int>(kube::IntAt(status, {"restartCount"}, 0));
        if (status.contains("state") && status["state"].is_object()) {
          const nlohmann::json& state = status["state"];
          view.running = state.contains("running");
          view.terminated = state.contains("terminated");
          view.waiting_reason = kube::StringAt(state, {"waiting", "reason"});
        }
      }
    }
  }
  return view;
}

}  // namespace kubetrain::kubectl_plugin
