// LoopbackNetwork: the pod network without network namespaces, for an agent
// that may not create them (not root). Every pod's processes run on the
// host's network; status.podIP is 127.0.0.1. Two replicas cannot both listen
// on 2222 there, so each (namespace, Service, port) gets its own loopback
// port (LoopbackEndpoints) and each container's environment is rewritten to
// name 127.0.0.1:<that port> for every Service address (TF_CONFIG,
// KUBETRAIN_*_HOSTS, MASTER_ADDR/MASTER_PORT, the user's own variables): each
// replica listens on its own port and dials its peers'. Each pod also gets
// its own metrics port (KUBETRAIN_METRICS_PORT, and the agent points the
// pod's prometheus.io/port annotation at it). There is no per-pod
// /etc/hosts and no link to cut. Not thread-safe: one caller.
#ifndef KUBETRAIN_TOOLS_NODE_AGENT_LOOPBACK_NETWORK_H_
#define KUBETRAIN_TOOLS_NODE_AGENT_LOOPBACK_NETWORK_H_

#include <map>
#include <string>

#include "tools/node_agent/loopback_endpoints.h"
#include "tools/node_agent/pod_network.h"
#include "tools/node_agent/port_allocator.h"

namespace kubetrain::node_agent {

class LoopbackNetwork final : public PodNetwork {
 public:
  // Borrows `ports`.
  explicit LoopbackNetwork(PortAllocator& ports) : ports_(ports), endpoints_(ports) {}

  absl::Status Init() override { return absl::OkStatus(); }
  // 127.0.0.1, no namespace, no prefix; the pod's metrics port, the same for
  // every pod of this namespace and name.
  absl::StatusOr<PodAttachment> Attach(const std::string& pod_key, const std::string& uid) override;
  // The pod sees the host's /etc/hosts: Service names are rewritten in its
  // environment instead. Nothing to write.
  absl::Status WriteHosts(const PodAttachment&, const std::string&) override {
    return absl::OkStatus();
  }
  absl::StatusOr<api::EnvList> RewriteEnvironment(
      const PodAttachment& attachment, const std::string& pod_namespace,
      const std::set<std::pair<std::string, std::string>>& services, api::EnvList env) override;
  // Ports stay allocated (a restarted pod gets the same ones).
  absl::Status Detach(const PodAttachment&) override { return absl::OkStatus(); }
  std::string Describe() const override;

  const LoopbackEndpoints& endpoints() const { return endpoints_; }

 private:
  PortAllocator& ports_;
  LoopbackEndpoints endpoints_;
  std::map<std::string, int> metrics_ports_;  // by pod key
};

}  // namespace kubetrain::node_agent

#endif  // KUBETRAIN_TOOLS_NODE_AGENT_LOOPBACK_NETWORK_H_
