// `kubectl kubetrain top JOB`: one row per replica pod from its runtime's
// metrics page (read through the API server's pod proxy); a pod that is not
// Running, or whose page cannot be read or parsed, gets a row saying why.
// Thread-compatible.
#ifndef KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_TOP_COMMAND_H_
#define KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_TOP_COMMAND_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/kubectl_kubetrain/cluster_reader.h"
#include "tools/kubectl_kubetrain/top_table.h"

namespace kubetrain::kubectl_plugin {

struct TopSnapshot {
  std::string phase;  // the job's
  bool finished = false;
  std::vector<TopRow> rows;  // in replica order
};

// `previous`: the metrics of the last round by pod UID (--watch), for rates
// over the interval; updated with this round's.
absl::StatusOr<TopSnapshot> CollectTop(ClusterReader& api, const std::string& ns,
                                       const std::string& job,
                                       std::map<std::string, ReplicaMetrics>* previous);

}  // namespace kubetrain::kubectl_plugin

#endif  // KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_TOP_COMMAND_H_
