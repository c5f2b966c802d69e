// Free TCP ports on 127.0.0.1 for local replicas: each is found by binding
// port 0 and reading the port the kernel chose. All sockets stay open until
// every port is chosen, so the ports are distinct; they are closed before
// returning, so another program could take one in between (unlikely).
// Stateless and thread-safe.
#ifndef KUBETRAIN_RUNTIME_LAUNCHER_LOOPBACK_PORTS_H_
#define KUBETRAIN_RUNTIME_LAUNCHER_LOOPBACK_PORTS_H_

#include <vector>

#include "absl/status/statusor.h"

namespace kubetrain::launcher {

absl::StatusOr<std::vector<int>> AllocateLoopbackPorts(int count);

}  // namespace kubetrain::launcher

#endif  // KUBETRAIN_RUNTIME_LAUNCHER_LOOPBACK_PORTS_H_
