// PortAllocator: hands out TCP ports for the loopback pod network, each port
// at most once per allocator. LoopbackPortAllocator takes free ports from
// below the kernel's ephemeral range (runtime/launcher/loopback_ports.h);
// tests use a fake that counts up. Not thread-safe: the agent's one loop
// calls it.
#ifndef KUBETRAIN_TOOLS_NODE_AGENT_PORT_ALLOCATOR_H_
#define KUBETRAIN_TOOLS_NODE_AGENT_PORT_ALLOCATOR_H_

#include <set>

#include "absl/status/statusor.h"

namespace kubetrain::node_agent {

class PortAllocator {
 public:
  virtual ~PortAllocator() = default;
  // A port nothing listens on now and that this allocator never returned
  // before. ResourceExhausted when there is none.
  virtual absl::StatusOr<int> Allocate() = 0;
};

class LoopbackPortAllocator final : public PortAllocator {
 public:
  absl::StatusOr<int> Allocate() override;

 private:
  std::set<int> handed_out_;
};

}  // namespace kubetrain::node_agent

#endif  // KUBETRAIN_TOOLS_NODE_AGENT_PORT_ALLOCATOR_H_
