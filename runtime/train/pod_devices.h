// PodDevices: what one training pod computes on: the devices of its
// replicas (SelectDevices from --device, --gpus and --cpu-replicas), a copy
// of the model on each, and the ReplicaReducer across them when there are
// two or more (NCCL for GPUs, else the host reducer). The Trainer runs them
// as PodReplicas. Not thread-safe; move-only.
#ifndef KUBETRAIN_RUNTIME_TRAIN_POD_DEVICES_H_
#define KUBETRAIN_RUNTIME_TRAIN_POD_DEVICES_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/exchange/replica_reducer.h"
#include "runtime/nn/model.h"
#include "runtime/tensor/compute_device.h"
#include "runtime/train/progress_reporter.h"
#include "runtime/train/train_options.h"
#include "runtime/train/trainer.h"

namespace kubetrain::train {

struct PodDevices {
  // Declaration order is destruction order reversed: the reducer and the
  // models go before the devices they use.
  std::vector<std::unique_ptr<ComputeDevice>> devices;
  std::vector<std::unique_ptr<nn::Model>> models;
  std::unique_ptr<exchange::ReplicaReducer> reducer;  // with two or more replicas

  // Replica 0: the model the exchange, evaluation and checkpoints see.
  nn::Model& model() { return *models.front(); }
  PodReplicas replicas();
};

// Opens every replica's device, one progress line each. A device that is
// absent or cannot be opened is a configuration error (FailedPrecondition,
// permanent), in one line with the driver's reason.
absl::StatusOr<PodDevices> OpenPodDevices(const TrainCommandOptions& o, ProgressReporter& progress);

// Builds o.model on every device of `pod` for samples of `sample_shape`,
// and the reducer when there are several; one line describing the pod.
absl::Status BuildPodModels(const TrainCommandOptions& o, const Shape& sample_shape,
                            PodDevices& pod, ProgressReporter& progress);

}  // namespace kubetrain::train

#endif  // KUBETRAIN_RUNTIME_TRAIN_POD_DEVICES_H_
