// RunTrainCommand: `kubetrain train` in one process: load data and model,
// train, evaluate, print the final line. Returns the process exit code
// (0 success, 1 permanent failure such as bad data or a bad model file) and
// writes errors as one line to `err`.
#ifndef KUBETRAIN_RUNTIME_TRAIN_TRAIN_COMMAND_H_
#define KUBETRAIN_RUNTIME_TRAIN_TRAIN_COMMAND_H_

#include <ostream>

#include "absl/status/statusor.h"
#include "kubetrain/clock.h"
#include "runtime/train/train_options.h"

namespace kubetrain::train {

absl::StatusOr<TrainResult> RunTraining(const TrainCommandOptions& options, std::ostream& out,
                                        const Clock& clock);

}  // namespace kubetrain::train

#endif  // KUBETRAIN_RUNTIME_TRAIN_TRAIN_COMMAND_H_
