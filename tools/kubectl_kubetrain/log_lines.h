// The text side of `kubectl kubetrain logs`: the prefix each line gets
// ("[worker-3 r2] "), the timestamp the API server puts before each line
// when asked (pods/log?timestamps=true), and the merge of several
// replicas' logs into one, in time order. Pure functions; thread-safe.
#ifndef KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_LOG_LINES_H_
#define KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_LOG_LINES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tools/kubectl_kubetrain/replica_ref.h"

namespace kubetrain::kubectl_plugin {

// "[worker-3 r2] ": the replica and its container's restartCount.
std::string LogPrefix(const ReplicaRef& replica, int restart);

// A line as pods/log?timestamps=true sends it: "<RFC 3339 time> <text>".
struct TimedLine {
  std::optional<int64_t> unix_micros;  // nullopt when the line has no timestamp
  std::string text;                    // the line without the timestamp
};
// Splits off the timestamp; a line that does not start with one is kept
// whole, without a time.
TimedLine SplitTimestamp(absl::string_view line);

// One replica's log, read with timestamps=true.
struct ReplicaLog {
  std::string prefix;  // LogPrefix(...)
  std::string text;    // the body as the API server sent it
};

// Every line of every log, prefixed and without its timestamp, ordered by
// time; lines of one log keep their order (a line without a timestamp
// goes with the one before it), and equal times keep the order of `logs`.
// Each output line ends in '\n'.
std::string MergeLogs(const std::vector<ReplicaLog>& logs);

}  // namespace kubetrain::kubectl_plugin

#endif  // KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_LOG_LINES_H_
