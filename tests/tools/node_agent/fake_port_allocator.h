// FakePortAllocator: ports counting up from `next`, or an error once
// `left` reaches 0. Not thread-safe.
#ifndef KUBETRAIN_TESTS_TOOLS_NODE_AGENT_FAKE_PORT_ALLOCATOR_H_
#define KUBETRAIN_TESTS_TOOLS_NODE_AGENT_FAKE_PORT_ALLOCATOR_H_

#include "absl/status/statusor.h"
#include "tools/node_agent/port_allocator.h"

namespace kubetrain::node_agent {

class FakePortAllocator final : public PortAllocator {
 public:
  absl::StatusOr<int> Allocate() override {
    if (left == 0) return absl::ResourceExhaustedError("no port left");
    --left;
    ++calls;
    return next++;
  }
  int next = 20000;
  int left = 1000;
  int calls = 0;
};

}  // namespace kubetrain::node_agent

#endif  // KUBETRAIN_TESTS_TOOLS_NODE_AGENT_FAKE_PORT_ALLOCATOR_H_
