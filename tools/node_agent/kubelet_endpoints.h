// What the node agent answers on the kubelet's port, where kube-apiserver
// sends what it proxies to a node's kubelet:
//   GET /containerLogs/{namespace}/{pod}/{container}  (pods/log)
//       ?follow=&previous=&tailLines=&limitBytes=
//   GET /healthz
// Container logs are read from the agent's files (<logs_dir>/<ns>/<pod>/
// <container>.log and its run index, container_log_index.h), so this needs
// nothing from the agent's loop. Answers as the kubelet's: 404 with
// 'pod "p" does not exist' or 'container "c" not found in pod "p"', 400 for a
// bad parameter or a run that does not exist ('previous terminated container
// "c" in pod "p" not found'), else 200 with the run's bytes; with follow, new
// bytes as they are written until the run ends, the client goes away or the
// server stops. sinceSeconds, sinceTime and timestamps need per-line times
// the agent does not keep: 400, saying so.
//
// Stateless; thread-safe.
#ifndef KUBETRAIN_TOOLS_NODE_AGENT_KUBELET_ENDPOINTS_H_
#define KUBETRAIN_TOOLS_NODE_AGENT_KUBELET_ENDPOINTS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "operator/kube/https_request.h"

namespace kubetrain::node_agent {

struct ContainerLogOptions {
  bool follow = false;
  bool previous = false;
  std::optional<int64_t> tail_lines;   // >= 0
  std::optional<int64_t> limit_bytes;  // > 0
};

// The query of a containerLogs request. InvalidArgument names the bad one.
absl::StatusOr<ContainerLogOptions> ParseContainerLogOptions(
    const std::map<std::string, std::string>& query);

// Answers `request`. `poll` is how often a follow looks for new bytes.
void HandleKubeletRequest(const std::string& logs_dir, const kube::HttpsRequest& request,
                          kube::HttpsReply& reply, absl::Duration poll = absl::Milliseconds(100));

}  // namespace kubetrain::node_agent

#endif  // KUBETRAIN_TOOLS_NODE_AGENT_KUBELET_ENDPOINTS_H_
