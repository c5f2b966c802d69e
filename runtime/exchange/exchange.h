// Exchange: how a replica turns its gradients into the next parameters.
// One interface for every strategy: a local optimizer (single process),
// parameter servers (sync / async / ssp, sharded) and allreduce (the TCP
// ring, NCCL). The trainer only ever talks to this interface; which backend
// runs is decided in one place from the cluster shape.
//
// Spans are in the memory of the device the exchange was made for (the
// model's: LocalExchange and AllreduceExchange take it and keep parameters,
// gradients and optimizer state there; a host-only exchange, the PS client,
// reaches a GPU model through StagedExchange). An exchange may leave work
// queued on that device when a call returns; the device's own order makes
// it visible to the next step.
//
// Errors: Unavailable or Aborted mean a peer was lost (a retryable exit,
// 129: the replica restarts and resumes); InvalidArgument,
// FailedPrecondition and the rest are permanent (exit 1: the same spec
// fails the same way again). Messages name the peer or the setting at fault.
// Implementations document their own thread-safety; the trainer calls them
// from one thread.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_EXCHANGE_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_EXCHANGE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "runtime/exchange/data_position.h"
#include "runtime/tensor/kernels/step_scalars.h"

namespace kubetrain::exchange {

// What a device-side step follows: the update's plan and the updates
// applied so far (Adam's step count).
struct DeviceStepPlan {
  kernels::UpdatePlan update;
  int64_t optimizer_steps = 0;
};

// The world a replica's data shard is cut for, when the exchange decides it
// (an elastic allreduce world, which grows and shrinks): this replica's rank
// and the world's size, and the generation that formed it.
struct Membership {
  int rank = 0;
  int size = 1;
  uint64_t generation = 0;
};

class Exchange {
 public:
  virtual ~Exchange() = default;

  virtual std::string name() const = 0;

  // Establishes the starting parameters in `params`. The replica that
  // initialises (chief / worker 0) passes freshly initialised values; others
  // receive the shared ones. Returns the global step to continue from
  // (0 on a fresh job, later when resuming).
  virtual absl::StatusOr<int64_t> Start(std::span<float> params) = 0;

  // Optional, during backward: every gradient at a flat index >= `ready_from`
  // is final for this step (backward fills the flat buffer from its end, so
  // calls come with falling `ready_from`). An exchange may start moving
  // those gradients while backward goes on (allreduce buckets). `grads` is
  // the whole flat gradient buffer; it stays valid and unchanged until the
  // next Step returns. Exchanges that need the whole gradient ignore this.
  virtual void GradientsReady(std::span<const float> grads, int64_t ready_from) {}
  // Whether GradientsReady does anything: a wrapper that must make the
  // gradients readable first (StagedExchange) does so only then.
  virtual bool TakesGradientsEarly() const { return false; }

  // Submits this replica's gradients for global step `step` (the gradient
  // of the mean loss over its batch). On success `params` holds the
  // parameters for the next step; returns the next global step.
  virtual absl::StatusOr<int64_t> Step(int64_t step, std::span<const float> grads,
                                       std::span<float> params) = 0;

  // This replica has finished training.
  virtual absl::Status Finish() = 0;

  // Elastic worlds: the world the data is sharded for now (after Start and
  // after each Step); nullopt: the one the trainer was configured with.
  virtual std::optional<Membership> CurrentMembership() const { return std::nullopt; }
  // Before Step(step): where its batch starts and where the next one does.
  // A state handed to another replica (a re-formed world) and a checkpoint
  // carry the position that goes with their step.
  virtual void SetDataPosition(int64_t step, const DataPosition& start, const DataPosition& after) {
  }
  // Where the state taken by the last Start or Step (one that did not
  // return step + 1) continues; nullopt: where its step says.
  virtual std::optional<DataPosition> TakenDataPosition() const { return std::nullopt; }

  // Steps on the device alone, for capture (CUDA graphs). An exchange whose
  // step only queues device work (LocalExchange; an allreduce world of one)
  // can have that work recorded once and replayed. After UseDeviceScalars it
  // takes its learning rate and optimizer coefficients from `scalars` (the
  // device's memory, advanced there each step) and says what they follow;
  // then QueueStep queues a step's update and touches nothing on the host,
  // and StepQueued does the rest of Step for a step queued or replayed (its
  // counters, a checkpoint due) and returns the next step. Others answer
  // nullopt and are driven by Step only. nullptr goes back to Step.
  virtual std::optional<DeviceStepPlan> UseDeviceScalars(const kernels::StepScalars* scalars) {
    return std::nullopt;
  }
  virtual absl::Status QueueStep(std::span<const float> grads, std::span<float> params) {
    return absl::UnimplementedError(absl::StrCat(name(), " cannot queue a step on the device"));
  }
  virtual absl::StatusOr<int64_t> StepQueued(int64_t step, std::span<const float> params) {
    return absl::UnimplementedError(absl::StrCat(name(), " cannot queue a step on the device"));
  }

  // Training stops early (SIGTERM: a deleted pod, a suspended job):
  // writes the checkpoint this replica is responsible for now, of `params`
  // (the parameters after the last completed step, whose number `step`
  // is: the next step to run), and returns its path; "" when this replica
  // writes none (other allreduce ranks, a parameter-server client, no
  // checkpoint directory). Called on the trainer's thread, after the last
  // Step returned (the in-flight one may have failed: its update was never
  // applied). Errors: the write's (the caller asked for this checkpoint and
  // must know it does not exist).
  virtual absl::StatusOr<std::string> CheckpointNow(int64_t step, std::span<const float> params) {
    return std::string();
  }
};

}  // namespace kubetrain::exchange

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_EXCHANGE_H_
