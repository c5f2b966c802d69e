#include "tools/node_agent/port_allocator.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/launcher/loopback_ports.h"

namespace kubetrain::node_agent {

absl::StatusOr<int> LoopbackPortAllocator::Allocate() {
  // Each call checks one random free port; a port handed out earlier may be
  // free again (its pod not started yet, or ended), so try a few.
  constexpr int kTries = 64;
  for (int i = 0; i < kTries; ++i) {
    absl::StatusOr<std::vector<int>> ports = launcher::AllocateLoopbackPorts(1);
    if (!ports.ok()) return ports.status();
    if (handed_out_.insert(ports->front()).second) return ports->front();
  }
  return absl::ResourceExhaustedError(absl::StrCat("no free loopback port in ", kTries,
                                                   " tries that was not handed out already (",
                                                   handed_out_.size(), " handed out)"));
}

}  // namespace kubetrain::node_agent
