// The table `kubectl kubetrain top` prints: one row per replica, and which
// peers a stalled replica waits for. The runtime's metrics say that a
// replica waits (kubetrain_allreduce_stall_seconds, kubetrain_stalled_peers),
// not for whom; as the operator's stall watch does, the replicas it waits
// for are read across the rows: those whose metrics cannot be read, else the
// training replicas at a lower step. Pure functions; thread-safe.
#ifndef KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_TOP_TABLE_H_
#define KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_TOP_TABLE_H_

#include <optional>
#include <string>
#include <vector>

#include "tools/kubectl_kubetrain/replica_metrics.h"
#include "tools/kubectl_kubetrain/replica_ref.h"

namespace kubetrain::kubectl_plugin {

struct TopRow {
  ReplicaRef replica;
  std::string pod;
  int restarts = 0;
  std::optional<ReplicaMetrics> metrics;  // nullopt: not read
  std::string problem;                    // why not ("pod Pending", the fetch's error)
};

// The replicas row `i` waits for ("worker-1"), or, when its metrics say it
// waits but no row stands out, "<n> peers"; empty when it does not wait.
std::vector<std::string> WaitsFor(const std::vector<TopRow>& rows, size_t i);

// REPLICA POD RESTARTS STEP SAMPLES/S EXCHANGE STALL WAITS-FOR, aligned; a
// row without metrics shows "-" and its problem in the last column.
std::string RenderTopTable(const std::vector<TopRow>& rows);

}  // namespace kubetrain::kubectl_plugin

#endif  // KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_TOP_TABLE_H_
