#include "operator/controller/node_loss.h"

#include "absl/strings/str_cat.h"

namespace kubetrain::controller {
namespace {

const kube::Json* ReadyCondition(const kube::Json& node) {
  if (!node.contains("status") || !node["status"].is_object()) return nullptr;
  const kube::Json& status = node["status"];
  if (!status.contains("conditions") || !status["conditions"].is_array()) return nullptr;
  for (const kube::Json& c : status["conditions"]) {
    if (c.is_object() && kube::StringAt(c, {"type"}) == "Ready") return &c;
  }
  return nullptr;
}

std::optional<absl::Time> TimeAt(const kube::Json& obj,
                                 std::initializer_list<absl::string_view> path) {
  std::optional<int64_t> us = kube::ParseTimeMicros(kube::StringAt(obj, path));
  if (!us) return std::nullopt;
  return absl::FromUnixMicros(*us);
}

int64_t WholeSeconds(absl::Duration d) { return absl::ToInt64Seconds(d); }

}  // namespace

bool NodeReady(const kube::Json& node) {
  const kube::Json* ready = ReadyCondition(node);
  return ready != nullptr && kube::StringAt(*ready, {"status"}) == "True";
}

NodeLossCheck CheckNodeLoss(const kube::Json& pod, const kube::Json* node, absl::Duration timeout,
                            absl::Time now) {
  NodeLossCheck out;
  const std::string node_name = kube::StringAt(pod, {"spec", "nodeName"});
  if (kube::IsBeingDeleted(pod)) {
    // deletionTimestamp is the end of the grace period.
    const std::optional<absl::Time> deadline = TimeAt(pod, {"metadata", "deletionTimestamp"});
    if (!deadline) return out;
    if (now >= *deadline + timeout) {
      out.stuck_terminating = true;
    } else {
      out.wait = *deadline + timeout - now;
    }
    return out;
  }
  if (node_name.empty()) return out;
  const std::string phase = PodPhase(pod);
  if (phase == "Succeeded" || phase == "Failed") return out;
  std::string why;
  if (node == nullptr) {
    why = absl::StrCat("node ", node_name, " is gone (its Node object was deleted)");
  } else {
    const kube::Json* ready = ReadyCondition(*node);
    if (ready != nullptr && kube::StringAt(*ready, {"status"}) == "True") return out;
    const std::optional<absl::Time> since =
        ready != nullptr ? TimeAt(*ready, {"lastTransitionTime"}) : std::nullopt;
    // Without a transition time the node has never said it is Ready: its
    // creation is as good a start as any.
    const absl::Time from =
        since.value_or(TimeAt(*node, {"metadata", "creationTimestamp"}).value_or(now));
    if (now - from < timeout) {
      out.wait = from + timeout - now;
      return out;
    }
    const std::string status = ready != nullptr ? kube::StringAt(*ready, {"status"}) : "";
    why = absl::StrCat("node ", node_name, " has not been Ready for ", WholeSeconds(now - from),
                       " s (Ready=", status.empty() ? "absent" : status);
    if (ready != nullptr && !kube::StringAt(*ready, {"reason"}).empty()) {
      absl::StrAppend(&why, ", ", kube::StringAt(*ready, {"reason"}));
    }
    absl::StrAppend(&why, ")");
    if (ready != nullptr && !kube::StringAt(*ready, {"message"}).empty()) {
      absl::StrAppend(&why, ": ", kube::StringAt(*ready, {"message"}));
    }
  }
  PodFailure f;
  f.reason = api::FailureReason::kNodeLost;
  f.exit = api::ReplicaExit::Code(137);
  f.detail = " (node lost)";
  f.node = node_name;
  f.message = why;
  out.lost = std::move(f);
  return out;
}

}  // namespace kubetrain::controller
