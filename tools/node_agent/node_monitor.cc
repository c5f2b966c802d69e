#include "tools/node_agent/node_monitor.h"

#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "api/labels.h"
#include "operator/kube/object.h"

namespace kubetrain::node_agent {
namespace {

using Json = nlohmann::json;
constexpr char kLog[] = "node-monitor";

std::optional<absl::Time> TimeOf(const std::string& text) {
  std::optional<int64_t> us = kube::ParseTimeMicros(text);
  if (!us) return std::nullopt;
  return absl::FromUnixMicros(*us);
}

}  // namespace

NodeMonitor::NodeMonitor(NodeApi& api, kube::Logger& logger, std::string self, absl::Duration grace,
                         std::function<absl::Time()> wall_now)
    : api_(api),
      logger_(logger),
      self_(std::move(self)),
      grace_(grace),
      wall_now_(std::move(wall_now)) {}

absl::Status NodeMonitor::Check() {
  const absl::Time now = wall_now_();
  // Once a second is plenty against a grace period of seconds.
  if (last_check_ && now - *last_check_ < absl::Seconds(1)) return absl::OkStatus();
  last_check_ = now;
  absl::StatusOr<std::vector<Json>> nodes = api_.ListNodes(api::kLabelNodeAgent);
  if (!nodes.ok()) return nodes.status();
  absl::StatusOr<std::vector<Json>> leases = api_.ListNodeLeases();
  if (!leases.ok()) return leases.status();
  std::map<std::string, absl::Time> renewed;
  for (const Json& lease : *leases) {
    if (std::optional<absl::Time> t = TimeOf(kube::StringAt(lease, {"spec", "renewTime"}))) {
      renewed[kube::Name(lease)] = *t;
    }
  }
  absl::Status first = absl::OkStatus();
  for (const Json& node : *nodes) {
    const std::string name = kube::Name(node);
    if (name == self_) continue;
    auto it = renewed.find(name);
    const absl::Time last =
        it != renewed.end()
            ? it->second
            : TimeOf(kube::StringAt(node, {"metadata", "creationTimestamp"})).value_or(now);
    if (now - last < grace_) continue;
    std::string ready_status;
    if (node.contains("status") && node["status"].contains("conditions") &&
        node["status"]["conditions"].is_array()) {
      for (const Json& c : node["status"]["conditions"]) {
        if (kube::StringAt(c, {"type"}) == "Ready") ready_status = kube::StringAt(c, {"status"});
      }
    }
    if (ready_status == "Unknown") continue;
    const std::string t = kube::FormatTime(absl::ToUnixMicros(now));
    const Json status{
        {"conditions",
         Json::array({{{"type", "Ready"},
                       {"status", "Unknown"},
                       {"reason", "NodeStatusUnknown"},
                       {"message", "Kubelet stopped posting node status."},
                       {"lastHeartbeatTime", kube::FormatTime(absl::ToUnixMicros(last))},
                       {"lastTransitionTime", t}}})}};
    absl::Status s = api_.PatchNodeStatus(name, status);
    if (s.ok()) {
      // As the controller: no new pods for it until it is back (its agent
      // takes the taint off when it registers again).
      Json taints = Json::array();
      if (node.contains("spec") && node["spec"].contains("taints") &&
          node["spec"]["taints"].is_array()) {
        for (const Json& t : node["spec"]["taints"]) {
          if (kube::StringAt(t, {"key"}) != kTaintUnreachable) taints.push_back(t);
        }
      }
      taints.push_back({{"key", kTaintUnreachable}, {"effect", "NoSchedule"}, {"timeAdded", t}});
      s = api_.PatchNodeSpec(name, Json{{"taints", taints}});
    }
    if (s.ok()) {
      logger_.Warning(kLog, absl::StrCat("node ", name, ": no heartbeat for ",
                                         absl::ToInt64Seconds(now - last), " s: Ready is Unknown"));
    } else if (first.ok()) {
      first = s;
    }
  }
  return first;
}

}  // namespace kubetrain::node_agent
