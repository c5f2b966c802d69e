// The run index of a container's log. A container's output is appended to one
// file, <state>/logs/<ns>/<pod>/<container>.log, across in-place restarts
// (scripts and tests read it whole). Beside it, <container>.log.runs records
// where each run of the container starts and ends in that file, one line per
// event:
//   start <byte offset>
//   end <byte offset> <exit code>
// so the kubelet's log endpoint can serve the current run and the previous
// one separately (kubectl logs, kubectl logs --previous). An index with no
// line says the container exists but never started; a missing index, that
// the pod has no such container.
//
// Free functions. Writers are the agent's one loop; readers (the log
// endpoint's threads) may read concurrently: each event is one append, and a
// reader ignores a last line without its newline.
#ifndef KUBETRAIN_TOOLS_NODE_AGENT_CONTAINER_LOG_INDEX_H_
#define KUBETRAIN_TOOLS_NODE_AGENT_CONTAINER_LOG_INDEX_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kubetrain::node_agent {

// "<log_path>.runs".
std::string RunIndexPath(const std::string& log_path);

// Creates an empty index (the container is known, not started yet).
absl::Status CreateRunIndex(const std::string& log_path);
// Records that a run starts at the log's current size (0 when there is no
// log yet). Call before the process starts writing.
absl::Status RecordRunStart(const std::string& log_path);
// Records that the current run ended at the log's current size.
absl::Status RecordRunEnd(const std::string& log_path, int exit_code);

// One run's bytes in the log: [begin, end), end unset while it runs.
struct LogRun {
  int64_t begin = 0;
  std::optional<int64_t> end;
  bool operator==(const LogRun& o) const { return begin == o.begin && end == o.end; }
};

// The runs an index's text describes, oldest first. Malformed lines and a
// last line without its newline are skipped; an "end" closes the latest run,
// and so does the next "start" when its end is missing.
std::vector<LogRun> ParseRunIndex(std::string_view text);

// The run `kubectl logs` shows: the latest one (`previous` false); with
// `previous`, the last run that ended (the kubelet's lastState.terminated):
// the latest one when it ended (the container waits to restart), else the one
// before it. (For a container that ended for good after one run the kubelet
// has no lastState and answers 400; this returns that run.) FailedPrecondition
// when there is none: the
// container never started, or has no earlier run; the message is the
// kubelet's ('previous terminated container "c" in pod "p" not found',
// 'container "c" in pod "p" is waiting to start: ContainerCreating').
absl::StatusOr<LogRun> SelectRun(const std::vector<LogRun>& runs, bool previous,
                                 const std::string& pod, const std::string& container);

// The offset in `bytes` where its last `tail_lines` lines start (a last line
// without a newline counts as a line); 0 when there are fewer; bytes.size()
// for 0 lines.
size_t TailStart(std::string_view bytes, int64_t tail_lines);

}  // namespace kubetrain::node_agent

#endif  // KUBETRAIN_TOOLS_NODE_AGENT_CONTAINER_LOG_INDEX_H_
