// PodNetwork: where a pod's processes live on the network. The node agent
// attaches a network to each pod before its containers start and detaches
// it when the pod ends. Implementations: NetnsNetwork (a network namespace
// per pod on a bridge), LoopbackNetwork (every pod on the host's network at
// 127.0.0.1, each Service port on its own loopback port: the fallback without
// permission for network namespaces) and, for tests, a fake. Implementations
// need not be thread-safe: the agent calls them from its one loop.
#ifndef KUBETRAIN_TOOLS_NODE_AGENT_POD_NETWORK_H_
#define KUBETRAIN_TOOLS_NODE_AGENT_POD_NETWORK_H_

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/cluster_spec.h"

namespace kubetrain::node_agent {

struct PodAttachment {
  std::string ip;         // the pod's address (status.podIP)
  std::string netns;      // `ip netns` name; "" = the host's namespace
  std::string host_link;  // the host end of the pod's link (veth); "" = none
  // Prepended to each container's argv to run it inside the namespace
  // (`ip netns exec <ns>`); empty = run as is.
  std::vector<std::string> exec_prefix;
  // Not 0: the port the pod's metrics server must listen on instead of the
  // one its prometheus.io/port annotation names (pods share one address);
  // the agent sets the annotation to it so that scrapers find it.
  int metrics_port = 0;
};

class PodNetwork {
 public:
  virtual ~PodNetwork() = default;
  // One-time set-up of the node side (bridge). Fails with the reason when the
  // process may not create network namespaces.
  virtual absl::Status Init() = 0;
  // `pod_key` is "<namespace>/<name>"; `uid` names the namespace uniquely.
  virtual absl::StatusOr<PodAttachment> Attach(const std::string& pod_key,
                                               const std::string& uid) = 0;
  // Writes the pod's /etc/hosts (seen by the pod's processes).
  virtual absl::Status WriteHosts(const PodAttachment& attachment, const std::string& contents) = 0;
  // The environment a container of the pod gets, from the one its spec
  // gives: what the pod must be told differently on this network (peers'
  // addresses, its metrics port). `services` are the (namespace, name) of
  // the Services that exist. The default changes nothing.
  virtual absl::StatusOr<api::EnvList> RewriteEnvironment(
      const PodAttachment& attachment, const std::string& pod_namespace,
      const std::set<std::pair<std::string, std::string>>& services, api::EnvList env) {
    (void)attachment, (void)pod_namespace, (void)services;
    return env;
  }
  // Removes the pod's namespace, link and files; frees the address.
  virtual absl::Status Detach(const PodAttachment& attachment) = 0;
  // One line for the logs: "network namespaces on bridge kt0 (10.244.0.0/24)".
  virtual std::string Describe() const = 0;
};

}  // namespace kubetrain::node_agent

#endif  // KUBETRAIN_TOOLS_NODE_AGENT_POD_NETWORK_H_
