#include "operator/controller/scheduling_check.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "operator/kube/object.h"

namespace kubetrain::controller {
namespace {

using Json = nlohmann::json;

// Names listed per scheduler message before "and N more".
constexpr size_t kNamesShown = 5;

bool Unscheduled(const Json& pod) {
  if (kube::IsBeingDeleted(pod)) return false;
  if (!kube::StringAt(pod, {"spec", "nodeName"}).empty()) return false;
  const std::string phase = kube::StringAt(pod, {"status", "phase"});
  return phase.empty() || phase == "Pending";
}

// The scheduler's word on the pod: PodScheduled=False's message.
std::string SchedulerMessage(const Json& pod) {
  const Json* conditions = nullptr;
  if (pod.contains("status") && pod["status"].is_object() && pod["status"].contains("conditions") &&
      pod["status"]["conditions"].is_array()) {
    conditions = &pod["status"]["conditions"];
  }
  if (conditions != nullptr) {
    for (const Json& c : *conditions) {
      if (!c.is_object() || kube::StringAt(c, {"type"}) != "PodScheduled" ||
          kube::StringAt(c, {"status"}) != "False") {
        continue;
      }
      std::string message = kube::StringAt(c, {"message"});
      if (message.empty()) message = kube::StringAt(c, {"reason"});
      if (!message.empty()) return message;
    }
  }
  return "no scheduling decision yet";
}

}  // namespace

SchedulingCheck CheckScheduling(const std::vector<ReplicaPod>& replicas, int64_t timeout_seconds,
                                absl::Time now, const std::optional<Gang>& gang) {
  SchedulingCheck out;
  const absl::Duration timeout = absl::Seconds(timeout_seconds);
  // Scheduler message -> the replicas it holds back, in replica order.
  std::map<std::string, std::vector<std::string>> by_message;
  std::vector<std::string> order;
  size_t late = 0;
  for (const ReplicaPod& r : replicas) {
    if (r.pod == nullptr || !Unscheduled(*r.pod)) continue;
    const std::optional<int64_t> created_us =
        kube::ParseTimeMicros(kube::StringAt(*r.pod, {"metadata", "creationTimestamp"}));
    const absl::Time since = created_us ? absl::FromUnixMicros(*created_us) : now;
    const absl::Duration waited = now - since;
    if (waited < timeout) {
      const absl::Duration left = timeout - waited;
      if (!out.wait || left < *out.wait) out.wait = left;
      // A gang waits as one: a late pod names all of it.
      if (!gang) continue;
    } else {
      ++late;
    }
    const std::string message = SchedulerMessage(*r.pod);
    auto [it, fresh] = by_message.try_emplace(message);
    if (fresh) order.push_back(message);
    it->second.push_back(absl::StrCat(r.replica, " (pod ", kube::Name(*r.pod), ")"));
    out.pods.push_back(kube::Name(*r.pod));
  }
  if (late == 0) {
    out.pods.clear();
    return out;
  }
  std::vector<std::string> parts;
  for (const std::string& message : order) {
    const std::vector<std::string>& names = by_message[message];
    std::vector<std::string> shown(names.begin(),
                                   names.begin() + std::min(names.size(), kNamesShown));
    std::string who = absl::StrJoin(shown, ", ");
    if (names.size() > kNamesShown) {
      absl::StrAppend(&who, " and ", names.size() - kNamesShown, " more");
    }
    parts.push_back(absl::StrCat(who, ": ", message));
  }
  std::string message = absl::StrCat(
      out.pods.size(), out.pods.size() == 1 ? " replica" : " replicas", " not scheduled within ",
      timeout_seconds, " s (runPolicy.schedulingTimeoutSeconds)");
  if (gang) {
    absl::StrAppend(&message, "; the gang (PodGroup ", gang->pod_group, ", minMember ",
                    gang->min_member, ") waits for all of them");
  }
  absl::StrAppend(&message, ": ", absl::StrJoin(parts, "; "));
  out.message = std::move(message);
  return out;
}

}  // namespace kubetrain::controller
