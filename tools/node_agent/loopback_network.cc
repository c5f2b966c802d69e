#include "tools/node_agent/loopback_network.h"

#include "absl/strings/str_cat.h"
#include "api/env_vars.h"

namespace kubetrain::node_agent {

absl::StatusOr<PodAttachment> LoopbackNetwork::Attach(const std::string& pod_key,
                                                      const std::string& uid) {
  (void)uid;
  auto it = metrics_ports_.find(pod_key);
  if (it == metrics_ports_.end()) {
    absl::StatusOr<int> port = ports_.Allocate();
    if (!port.ok()) {
      return absl::Status(port.status().code(), absl::StrCat("metrics port for ", pod_key, ": ",
                                                             port.status().message()));
    }
    it = metrics_ports_.emplace(pod_key, *port).first;
  }
  PodAttachment a;
  a.ip = "127.0.0.1";
  a.metrics_port = it->second;
  return a;
}

absl::StatusOr<api::EnvList> LoopbackNetwork::RewriteEnvironment(
    const PodAttachment& attachment, const std::string& pod_namespace,
    const std::set<std::pair<std::string, std::string>>& services, api::EnvList env) {
  absl::StatusOr<api::EnvList> out = endpoints_.Rewrite(pod_namespace, services, env);
  if (!out.ok()) return out.status();
  if (attachment.metrics_port == 0) return out;
  // The pod's own metrics port, unless the container turned metrics off.
  bool set = false;
  for (auto& [name, value] : *out) {
    if (name != api::kEnvMetricsPort) continue;
    if (value != "0") value = absl::StrCat(attachment.metrics_port);
    set = true;
  }
  if (!set) out->emplace_back(api::kEnvMetricsPort, absl::StrCat(attachment.metrics_port));
  return out;
}

std::string LoopbackNetwork::Describe() const {
  return "the host's network (loopback fallback): podIP 127.0.0.1, each Service port on its own "
         "loopback port, peers' addresses rewritten in each container's environment";
}

}  // namespace kubetrain::node_agent
