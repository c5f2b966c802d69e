// Every Prometheus metric the `kubetrain` binary exports, in one place
// (house rule 9). Names follow Prometheus conventions: the `kubetrain_`
// prefix, base units in the name (`_seconds`, `_bytes`), `_total` on
// counters (prometheus-cpp adds no suffix), `_ratio` for 0..1 values.
// Labels are low-cardinality only: the constant labels (training_job,
// training_namespace, replica_type, replica_index) on every series, plus the
// few per-family labels named below with their closed sets of values.
// Constants only; thread-safe.
#ifndef KUBETRAIN_RUNTIME_METRICS_METRIC_NAMES_H_
#define KUBETRAIN_RUNTIME_METRICS_METRIC_NAMES_H_

#include "api/metric_names.h"

namespace kubetrain::metrics {

struct MetricName {
  const char* name;
  const char* help;
};

// Constant labels, from the replica's environment (constant_labels.h). None
// is a label Prometheus sets on targets (job, namespace, pod, instance,
// container, endpoint, service): scraped without honor_labels, a clash would
// rename ours exported_<name>. So the TrainingJob is `training_job` and its
// namespace `training_namespace`, whatever the scrape path.
// The operator reads them, so they are defined in api/metric_names.h.
inline constexpr const char* kLabelJob = api::kMetricLabelJob;
inline constexpr const char* kLabelNamespace = api::kMetricLabelNamespace;
inline constexpr const char* kLabelReplicaType = api::kMetricLabelReplicaType;
inline constexpr const char* kLabelReplicaIndex = api::kMetricLabelReplicaIndex;
// Per-family labels.
inline constexpr char kLabelPeerRole[] = "peer_role";  // ps | worker | evaluator
inline constexpr char kLabelPhase[] = "phase";         // compute | exchange
inline constexpr char kLabelOp[] = "op";               // push | pull | allreduce
inline constexpr char kLabelReason[] = "reason";       // see RejectReason
inline constexpr char kLabelDevice[] = "device";       // cuda:0, ...

// Every replica.
inline constexpr MetricName kStartTime = {
    "kubetrain_start_time_seconds",
    "Unix time at which this replica process started; changes on every restart."};
inline constexpr MetricName kGpuMemoryUsed = {
    "kubetrain_gpu_memory_used_bytes",
    "GPU memory in use by this replica, per device (exported only when training on a GPU)."};

// Training replicas (chief, workers, single process).
inline constexpr MetricName kSteps = {"kubetrain_steps_total",
                                      "Training steps this replica completed."};
inline constexpr MetricName kSamples = {"kubetrain_samples_total",
                                        "Training samples this replica processed."};
inline constexpr MetricName kStepDuration = {
    "kubetrain_step_duration_seconds",
    "Wall time of one training step: data, forward, backward and exchange."};
inline constexpr MetricName kStepPhaseDuration = {
    "kubetrain_step_phase_duration_seconds",
    "Wall time of one training step by phase: compute (data, forward, backward) or exchange."};
inline constexpr MetricName kTrainLoss = {
    api::kMetricTrainLoss, "Mean training loss over the steps since the last update (~1 s)."};
inline constexpr MetricName kTrainAccuracy = {
    api::kMetricTrainAccuracy,
    "Training accuracy over the steps since the last update (~1 s), 0..1."};
inline constexpr MetricName kLearningRate = {"kubetrain_learning_rate",
                                             "Learning rate of the current step."};
inline constexpr MetricName kGlobalStep = {
    api::kMetricGlobalStep,
    "Step this replica has reached: sync, the job's global step; async/ssp workers, their own "
    "steps; PS, updates applied; evaluator, the step last evaluated."};
inline constexpr MetricName kTotalSteps = {
    api::kMetricTotalSteps,
    "Steps this replica will run in total, in kubetrain_global_step's units."};
inline constexpr MetricName kSamplesPerSecond = {
    api::kMetricSamplesPerSecond,
    "Training samples per second of this replica over the last update interval (~1 s)."};

// Replicas that evaluate (chief at epoch ends, evaluator).
inline constexpr MetricName kEvalAccuracy = {api::kMetricEvalAccuracy,
                                             "Test accuracy of the last evaluation, 0..1."};
inline constexpr MetricName kEvalLoss = {"kubetrain_eval_loss",
                                         "Test loss of the last evaluation."};

// Exchange (workers and parameter servers).
inline constexpr MetricName kExchangeSentBytes = {
    "kubetrain_exchange_sent_bytes_total",
    "Tensor payload bytes sent to peers (workers: gradients; PS: parameters), by peer role."};
inline constexpr MetricName kExchangeReceivedBytes = {
    "kubetrain_exchange_received_bytes_total",
    "Tensor payload bytes received from peers (workers: parameters; PS: gradients), by peer "
    "role."};
inline constexpr MetricName kExchangeDuration = {
    "kubetrain_exchange_duration_seconds",
    "Wall time of one exchange call with one peer: push, pull or allreduce."};
inline constexpr MetricName kPeerRestarts = {
    "kubetrain_peer_restarts_total",
    "Peers seen restarting or re-registering (workers: PS incarnation changes; PS: worker "
    "re-registrations)."};
inline constexpr MetricName kStalledPeers = {
    "kubetrain_stalled_peers",
    "Peers currently unreachable (workers) or silent for longer than the stall threshold (PS)."};

// Allreduce (worker-only jobs).
inline constexpr MetricName kAllreduceStallSeconds = {
    api::kMetricAllreduceStallSeconds,
    "How long the collective in flight has waited for ranks that have not joined it, once that "
    "passes --stall-warning; 0 otherwise."};
inline constexpr MetricName kWorldSize = {api::kMetricWorldSize,
                                          "Ranks in the allreduce world this rank trains in now."};
inline constexpr MetricName kWorldGeneration = {
    api::kMetricWorldGeneration,
    "Generation of the allreduce world: 1 when it first forms, +1 each time it re-forms after a "
    "rank was lost, joined or left."};
inline constexpr MetricName kMembershipChanges = {
    api::kMetricMembershipChanges,
    "Ranks that joined, left or were lost, as seen when the world re-formed, by change."};
inline constexpr MetricName kWorldMember = {
    api::kMetricWorldMember,
    "1 for each replica in the current allreduce world (rank 0 only), by member."};

// Parameter servers.
inline constexpr MetricName kWorkersConnected = {
    "kubetrain_ps_workers_connected", "Training replicas registered and not yet finished."};
inline constexpr MetricName kRejectedPushes = {
    "kubetrain_ps_rejected_pushes_total",
    "Gradient pushes refused with the parameters untouched, by reason."};
inline constexpr MetricName kStaleness = {
    "kubetrain_ps_gradient_staleness_steps",
    "Updates applied between a worker's pull and the apply of its gradient (async, ssp)."};
inline constexpr MetricName kCheckpointsWritten = {
    "kubetrain_checkpoints_written_total",
    "Checkpoints this replica wrote (PS shards; rank 0 of allreduce jobs)."};
inline constexpr MetricName kCheckpointDuration = {
    "kubetrain_checkpoint_duration_seconds",
    "Wall time to write one checkpoint (write, fsync, rename, prune)."};
inline constexpr MetricName kCheckpointFailures = {
    "kubetrain_checkpoint_failures_total",
    "Periodic checkpoint writes that failed; training went on and the write is tried again when "
    "the next one is due (checkpoint_policy.h)."};

// Every family above, for tests and docs.
inline constexpr MetricName kAllMetrics[] = {
    kStartTime,
    kGpuMemoryUsed,
    kSteps,
    kSamples,
    kStepDuration,
    kStepPhaseDuration,
    kTrainLoss,
    kTrainAccuracy,
    kLearningRate,
    kGlobalStep,
    kTotalSteps,
    kSamplesPerSecond,
    kEvalAccuracy,
    kEvalLoss,
    kExchangeSentBytes,
    kExchangeReceivedBytes,
    kExchangeDuration,
    kPeerRestarts,
    kStalledPeers,
    kAllreduceStallSeconds,
    kWorldSize,
    kWorldGeneration,
    kMembershipChanges,
    kWorldMember,
    kWorkersConnected,
    kRejectedPushes,
    kStaleness,
    kCheckpointsWritten,
    kCheckpointDuration,
    kCheckpointFailures,
};

}  // namespace kubetrain::metrics

#endif  // KUBETRAIN_RUNTIME_METRICS_METRIC_NAMES_H_
