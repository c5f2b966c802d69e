// NodeMonitor: the node lifecycle controller's first duty, for the local
// cluster. kube-controller-manager marks a Node's Ready condition Unknown
// (reason NodeStatusUnknown, "Kubelet stopped posting node status.") once
// its Lease has not been renewed for --node-monitor-grace-period; the
// control plane the local cluster runs has that controller off, and the API
// emulator has none. Each node agent run with --node-monitor-grace-period
// does it for the other agents' Nodes (label kubetrain.io/node-agent), so
// stopping one of two agents is a lost node, as on a real cluster; and it
// taints it node.kubernetes.io/unreachable:NoSchedule, as that controller
// does. A node whose agent comes back registers itself Ready again and
// takes the lifecycle taints off (NodeAgent::Register).
//
// Not thread-safe: the agent's loop calls Check.
#ifndef KUBETRAIN_TOOLS_NODE_AGENT_NODE_MONITOR_H_
#define KUBETRAIN_TOOLS_NODE_AGENT_NODE_MONITOR_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "operator/kube/logger.h"
#include "tools/node_agent/node_api.h"

namespace kubetrain::node_agent {

class NodeMonitor {
 public:
  // Borrows `api` and `logger`. `self` is this agent's node (never judged).
  NodeMonitor(NodeApi& api, kube::Logger& logger, std::string self, absl::Duration grace,
              std::function<absl::Time()> wall_now);

  // One look (at most one a second) at every agent's Node and Lease: a
  // node whose Lease (else the Node itself, from its creation) is older
  // than the grace period and whose Ready is not Unknown yet is marked
  // Unknown. Returns the first API error.
  absl::Status Check();

 private:
  NodeApi& api_;
  kube::Logger& logger_;
  const std::string self_;
  const absl::Duration grace_;
  const std::function<absl::Time()> wall_now_;
  std::optional<absl::Time> last_check_;
};

}  // namespace kubetrain::node_agent

#endif  // KUBETRAIN_TOOLS_NODE_AGENT_NODE_MONITOR_H_
