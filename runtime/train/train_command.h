// `kubetrain train`: the entry point of every replica. Without TF_CONFIG it
// trains in this process. With TF_CONFIG it takes the role the cluster spec
// gives it: `ps` serves a parameter-server shard, `worker`/`chief` train
// through the parameter servers, `evaluator` evaluates the shared parameters
// as they change.
#ifndef KUBETRAIN_RUNTIME_TRAIN_TRAIN_COMMAND_H_
#define KUBETRAIN_RUNTIME_TRAIN_TRAIN_COMMAND_H_

#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "runtime/train/train_options.h"

namespace kubetrain::train {

// Runs the replica and returns the process exit code (api/exit_codes.h).
// Errors are written to `err` as one line. A replica stopped by
// SIGTERM/SIGINT after its checkpoint (an allreduce worker, a PS shard)
// sets `*termination_message` (when not null) to what its container's
// termination message should say (api/checkpoint_message.h's line when it
// wrote one) and returns 128+signal.
int RunTrainCommand(const TrainCommandOptions& options, std::ostream& out, std::ostream& err,
                    const Clock& clock, std::string* termination_message = nullptr);

// Single-process training (no TF_CONFIG), for tests and tools.
absl::StatusOr<TrainResult> RunTraining(const TrainCommandOptions& options, std::ostream& out,
                                        const Clock& clock);

}  // namespace kubetrain::train

#endif  // KUBETRAIN_RUNTIME_TRAIN_TRAIN_COMMAND_H_
