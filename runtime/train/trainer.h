// Trainer: the training loop of one replica (one pod). Draws this replica's
// shard of the data in batches, runs forward/backward on the model, hands
// gradients to an Exchange, reports progress, and evaluates on the test
// split. The model's parameters and gradients stay on its device: the
// exchange gets spans of that device's memory (wrap a host exchange in
// StagedExchange).
//
// A pod may hold several device replicas (PodReplicas: `--gpus N`): each
// step's batch is split across them (SplitBatch), each runs forward and
// backward on its rows, their gradients are weighted by their share of the
// rows and summed into replica 0 (ReplicaReducer), the exchange sees only
// replica 0 (one push per step for the whole pod), and the parameters it
// returns are broadcast to every replica, so they stay bit-for-bit equal.
//
// On a GPU with one replica a step waits for nothing: the data set is
// resident and each batch gathered there, the loss summed there and read per
// progress line, and, where the exchange only queues device work, the
// step's scalars (learning rate, Adam's coefficients, the batch's place,
// dropout's call number) live in device memory (kernels::StepScalars), so
// the whole step can be captured as a CUDA graph and replayed.
// Not thread-safe; borrows everything it is given for its lifetime.
#ifndef KUBETRAIN_RUNTIME_TRAIN_TRAINER_H_
#define KUBETRAIN_RUNTIME_TRAIN_TRAINER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "runtime/data/dataset.h"
#include "runtime/exchange/exchange.h"
#include "runtime/exchange/replica_reducer.h"
#include "runtime/metrics/runtime_metrics.h"
#include "runtime/nn/model.h"
#include "runtime/train/progress_reporter.h"
#include "runtime/train/stop_request.h"

namespace kubetrain::train {

struct TrainerOptions {
  int64_t epochs = 10;
  int64_t batch_size = 64;
  uint64_t seed = 1;    // data order and parameter initialisation
  int shard_index = 0;  // this replica's slice of the training data
  int num_shards = 1;
  // The exchange's world may change size (an elastic allreduce job): the
  // data is resharded for the world it reports (Exchange::
  // CurrentMembership) at every step boundary, positioned by the world-wide
  // cursor it hands over, and training ends after `epochs` epochs however
  // many steps they took. The data stays on the host (no resident copy).
  bool elastic = false;
  int64_t log_every_steps = 100;  // progress line interval; 0 = per epoch only
  int64_t eval_batch_size = 1000;
  bool eval_every_epoch = true;
  // CUDA graphs: where a step runs on the device alone (a GPU with the data
  // resident, one replica, an exchange that only queues work: local
  // training or an allreduce world of one), its kernels are captured once
  // (after two warm-up steps) and replayed as one launch a step. "auto":
  // when possible, saying why not once; "on": required (an error says why
  // it cannot be); "off": steps launched kernel by kernel.
  std::string cuda_graph = "auto";
  // Learning rate to show in progress lines for a step (informational).
  std::function<float(int64_t)> lr_for_step = nullptr;
  // Borrowed; nullptr records nothing. Per step: counters and histograms;
  // about once a second: loss, accuracy, samples/s and learning rate.
  metrics::RuntimeMetrics* metrics = nullptr;
  // Borrowed; nullptr: never stops early. Once requested (a signal
  // watcher's thread), training stops at the next step boundary, or when
  // the step in flight fails, and the exchange checkpoints the parameters
  // of the last completed step (Exchange::CheckpointNow); Run then returns
  // a result with `stopped` set instead of finishing.
  StopRequest* stop = nullptr;
};

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
  int64_t samples = 0;
};

// How training ended when a StopRequest stopped it early.
struct StopOutcome {
  int64_t step = 0;             // the next step to run: the checkpoint's step
  std::string checkpoint_path;  // "" when this replica writes none
  std::string cause;            // StopRequest::cause(), e.g. "SIGTERM"
};

struct TrainResult {
  std::optional<StopOutcome> stopped;  // set: stopped early, not finished
  int64_t steps = 0;
  double train_loss = 0;      // last epoch's mean
  double train_accuracy = 0;  // last epoch's mean
  EvalResult test;
  double seconds = 0;
  double samples_per_second = 0;
  double exchange_share = 0;  // of step time spent in the exchange
};

// Loss and accuracy of `model` over all of `ds` (inference mode). Errors
// are the model's device's.
absl::StatusOr<EvalResult> Evaluate(nn::Model& model, const data::Dataset& ds, int64_t batch_size);

// Checks that `ds` fits `model`: sample size and labels within the output.
absl::Status CheckDatasetFitsModel(const data::Dataset& ds, const nn::Model& model,
                                   const std::string& what);

// Rows of a batch of `n` for each of `replicas` replicas, in order: the
// first n % replicas replicas take one row more (10 over 4: 3, 3, 2, 2).
// A replica may get none when n < replicas.
std::vector<int64_t> SplitBatch(int64_t n, int replicas);

// The device replicas of one pod: copies of one model, each on its own
// device (models[0] is the one the exchange and evaluation see), and the
// reducer across their devices (required with two or more). Borrowed.
struct PodReplicas {
  std::vector<nn::Model*> models;
  exchange::ReplicaReducer* reducer = nullptr;
};

class Trainer {
 public:
  Trainer(nn::Model& model, exchange::Exchange& exchange, const data::Dataset& train,
          const data::Dataset* test, TrainerOptions options, ProgressReporter& progress,
          const Clock& clock);
  // Several replicas in this process; options.batch_size is the pod's
  // batch per step, split across them.
  Trainer(PodReplicas pod, exchange::Exchange& exchange, const data::Dataset& train,
          const data::Dataset* test, TrainerOptions options, ProgressReporter& progress,
          const Clock& clock);

  absl::StatusOr<TrainResult> Run();

 private:
  // Replicas' gradients, weighted by rows / n, summed into replica 0.
  absl::Status ReduceGradients(const std::vector<int64_t>& rows, int64_t n);
  // Replica 0's parameters to every other replica.
  absl::Status BroadcastParams();
  // After training: every replica holds replica 0's parameters, bit for
  // bit (Internal naming the replica otherwise).
  absl::Status CheckReplicasIdentical();
  // A requested stop at `step` (the last completed one's next): the
  // exchange's checkpoint, logged, into `result`.
  absl::StatusOr<TrainResult> StopAt(int64_t step, TrainResult result, double t0);

  PodReplicas pod_;
  nn::Model& model_;  // replica 0
  exchange::Exchange& exchange_;
  const data::Dataset& train_;
  const data::Dataset* test_;
  TrainerOptions opt_;
  ProgressReporter& progress_;
  const Clock& clock_;
};

}  // namespace kubetrain::train

#endif  // KUBETRAIN_RUNTIME_TRAIN_TRAINER_H_
