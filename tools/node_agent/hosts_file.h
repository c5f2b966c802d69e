// The /etc/hosts a pod's network namespace sees, pure over API objects: what
// cluster DNS would answer for headless Services. Each Service whose
// selector matches a pod with an IP resolves, by `<svc>.<ns>`,
// `<svc>.<ns>.svc` and `<svc>.<ns>.svc.cluster.local` (and by `<svc>` alone
// inside the pod's own namespace), to that pod's IP; the pod's own name
// resolves to its IP. Free functions; thread-safe.
#ifndef KUBETRAIN_TOOLS_NODE_AGENT_HOSTS_FILE_H_
#define KUBETRAIN_TOOLS_NODE_AGENT_HOSTS_FILE_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kubetrain::node_agent {

// A Service resolves to the status.podIP of a non-terminal pod of its
// namespace that its selector matches. Services without a selector or
// without such a pod resolve to nothing. Several matching pods: the first by
// name (each headless Service of a job selects exactly one).
std::string HostsFile(const std::string& pod_namespace, const std::string& pod_name,
                      const std::string& pod_ip, const std::vector<nlohmann::json>& services,
                      const std::vector<nlohmann::json>& pods);

}  // namespace kubetrain::node_agent

#endif  // KUBETRAIN_TOOLS_NODE_AGENT_HOSTS_FILE_H_
