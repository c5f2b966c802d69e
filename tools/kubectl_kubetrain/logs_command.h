// `kubectl kubetrain logs JOB` without -f: every replica's log (or one
// replica's), read once with timestamps and merged in time order, each line
// prefixed "[worker-3 r2] " (a log server that refuses timestamps, as
// kubetrain-node-agent does, is read without them: replica by replica).
// Thread-compatible.
#ifndef KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_LOGS_COMMAND_H_
#define KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_LOGS_COMMAND_H_

#include <optional>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "tools/kubectl_kubetrain/cluster_reader.h"
#include "tools/kubectl_kubetrain/replica_ref.h"

namespace kubetrain::kubectl_plugin {

struct LogsOptions {
  std::string ns;
  std::string job;
  std::string container;           // "" = each pod's first container
  std::optional<ReplicaRef> only;  // --replica
  bool previous = false;           // the previous instance of each container
};

// Writes the merged log to `out`; a replica whose log cannot be read is
// named on `err` with the API's answer. NotFound when the job or (with
// --replica) the replica's pod does not exist; FailedPrecondition when no
// replica's log could be read.
absl::Status PrintLogs(ClusterReader& api, const LogsOptions& options, std::ostream& out,
                       std::ostream& err);

}  // namespace kubetrain::kubectl_plugin

#endif  // KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_LOGS_COMMAND_H_
