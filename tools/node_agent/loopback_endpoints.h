// LoopbackEndpoints: the address book of the loopback pod network (used when
// the agent may not create network namespaces). Every pod runs on the host
// at 127.0.0.1, so two pods cannot both listen on a Service's port (2222):
// each (namespace, Service name, port) gets its own loopback port, allocated
// on first use and kept for the agent's life, and what a container is told
// about its peers is rewritten to those ports. The runtime listens on the
// port of its own entry in TF_CONFIG, so after the rewrite each replica binds
// its own port and dials its peers' ports.
//
// Rewritten in a container's environment (every variable, so TF_CONFIG,
// KUBETRAIN_PS_HOSTS / _WORKER_HOSTS / _CHIEF_HOSTS and a user's own
// variables alike):
//  - each `host:port` whose host names a Service -> `127.0.0.1:<allocated>`;
//  - a value that is only such a host -> `127.0.0.1`;
//  - MASTER_ADDR naming a Service, with MASTER_PORT -> 127.0.0.1 and the
//    allocated port.
// A host names a Service when it is `<svc>.<ns>.svc[.<domain>]`, or
// `<host>.<subdomain>.<ns>.svc[.<domain>]` (serviceMode PerJob; keyed by
// <host>), whether the Service exists yet or not; or `<svc>` (the pod's own
// namespace) or `<svc>.<ns>` when that Service exists. Anything else (other
// hosts, IP addresses) is left as written.
//
// Not thread-safe: the agent's one loop calls it.
#ifndef KUBETRAIN_TOOLS_NODE_AGENT_LOOPBACK_ENDPOINTS_H_
#define KUBETRAIN_TOOLS_NODE_AGENT_LOOPBACK_ENDPOINTS_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "absl/status/statusor.h"
#include "api/cluster_spec.h"
#include "tools/node_agent/port_allocator.h"

namespace kubetrain::node_agent {

// (namespace, name) of the Services that exist.
using ServiceNames = std::set<std::pair<std::string, std::string>>;

class LoopbackEndpoints {
 public:
  // (namespace, name, port).
  using Key = std::tuple<std::string, std::string, int>;

  // Borrows `ports`.
  explicit LoopbackEndpoints(PortAllocator& ports) : ports_(ports) {}

  // The loopback port standing for `port` of `name` in `ns`: the same one on
  // every call.
  absl::StatusOr<int> PortFor(const std::string& ns, const std::string& name, int port);

  // The (namespace, name) that `host` means, seen from a pod in
  // `pod_namespace` (see the top comment); nullopt for any other host.
  static std::optional<std::pair<std::string, std::string>> ResolveHost(
      const std::string& host, const std::string& pod_namespace, const ServiceNames& services);

  // `env` with peers' addresses rewritten (see the top comment). Fails only
  // when no port is left to allocate.
  absl::StatusOr<api::EnvList> Rewrite(const std::string& pod_namespace,
                                       const ServiceNames& services, const api::EnvList& env);

  const std::map<Key, int>& allocated() const { return allocated_; }

 private:
  absl::StatusOr<std::string> RewriteValue(const std::string& value,
                                           const std::string& pod_namespace,
                                           const ServiceNames& services);

  PortAllocator& ports_;
  std::map<Key, int> allocated_;
};

}  // namespace kubetrain::node_agent

#endif  // KUBETRAIN_TOOLS_NODE_AGENT_LOOPBACK_ENDPOINTS_H_
