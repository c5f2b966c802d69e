// Free TCP ports for local replicas, taken from BELOW the kernel's
// ephemeral range (net.ipv4.ip_local_port_range): ports the kernel hands out
// (bind to port 0, or the local end of any outgoing connection) come from
// that range, so an outgoing connection can never grab a port between this
// call and the replica binding it. Candidates start at a random point and
// are checked by binding 0.0.0.0 (replicas listen on every address); all
// sockets stay open until every port is chosen, so the ports are distinct.
// Stateless and thread-safe.
#ifndef KUBETRAIN_RUNTIME_LAUNCHER_LOOPBACK_PORTS_H_
#define KUBETRAIN_RUNTIME_LAUNCHER_LOOPBACK_PORTS_H_

#include <vector>

#include "absl/status/statusor.h"

namespace kubetrain::launcher {

absl::StatusOr<std::vector<int>> AllocateLoopbackPorts(int count);

}  // namespace kubetrain::launcher

#endif  // KUBETRAIN_RUNTIME_LAUNCHER_LOOPBACK_PORTS_H_
