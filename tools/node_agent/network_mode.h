// Which pod network the node agent uses (--network): `netns` (a network
// namespace per pod, needs root), `loopback` (every pod on the host's network,
// LoopbackNetwork) or `auto` (netns when this process may create a network
// namespace, else loopback, saying so). ChooseNetwork is pure;
// ProbeNetworkNamespaces asks the kernel. Thread-safe.
#ifndef KUBETRAIN_TOOLS_NODE_AGENT_NETWORK_MODE_H_
#define KUBETRAIN_TOOLS_NODE_AGENT_NETWORK_MODE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kubetrain::node_agent {

enum class NetworkMode { kAuto, kNetns, kLoopback };

// "auto", "netns" or "loopback"; InvalidArgument naming them otherwise.
absl::StatusOr<NetworkMode> ParseNetworkMode(const std::string& text);

struct NetworkChoice {
  bool loopback = false;
  // Non-empty: the one line to log about the choice (the fallback and what
  // it means).
  std::string notice;
};

// `probe` is ProbeNetworkNamespaces()'s answer (only read for kAuto).
NetworkChoice ChooseNetwork(NetworkMode mode, const absl::Status& probe);

// OK when this process may create a network namespace: a child process
// tries unshare(CLONE_NEWNET). PermissionDenied with the kernel's reason
// when it may not.
absl::Status ProbeNetworkNamespaces();

}  // namespace kubetrain::node_agent

#endif  // KUBETRAIN_TOOLS_NODE_AGENT_NETWORK_MODE_H_
