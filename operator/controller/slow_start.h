// Runs a pass's creates as client-go's slowStartBatch does: in batches of 1,
// 2, 4, ... up to `max_parallel` operations at once, each batch on threads
// of its own; a batch with a failure stops the rest, so a quota or
// admission error costs one request, not hundreds. An exception thrown by an
// operation becomes an Internal error (it must not escape a thread); with
// no thread to be had (a pids limit), an operation runs on the caller's.
// Stateless; the operations must be safe to run concurrently.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_SLOW_START_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_SLOW_START_H_

#include <functional>
#include <vector>

#include "absl/status/status.h"

namespace kubetrain::controller {

using SlowStartOp = std::function<absl::Status()>;

// The first error of the batch that failed (the lowest index in it); OK
// when every operation succeeded.
absl::Status RunSlowStart(const std::vector<SlowStartOp>& ops, int max_parallel);

// RunSlowStart(a) and RunSlowStart(b) at the same time (a job's Services and
// pods: its creates take the rounds of its pods, not of both one after the
// other); the first error of either, a's when both fail.
absl::Status RunSlowStartSideBySide(const std::vector<SlowStartOp>& a,
                                    const std::vector<SlowStartOp>& b, int max_parallel);

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_SLOW_START_H_
