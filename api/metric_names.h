// The runtime's metric names and constant labels that the operator reads
// (its progress poller turns them into TrainingJob status.progress). The
// runtime's own list (runtime/metrics/metric_names.h) takes these names from
// here, so writer and reader cannot drift; tests/api/metric_contract_test.cc
// runs the one through the other. Constants only; thread-safe.
#ifndef KUBETRAIN_API_METRIC_NAMES_H_
#define KUBETRAIN_API_METRIC_NAMES_H_

namespace kubetrain::api {

// Constant labels on every runtime series, from the replica's environment
// (env_vars.h). None is a label Prometheus sets on targets (job, namespace,
// pod, instance, ...): scraped without honor_labels a clash would rename ours
// exported_<name>.
inline constexpr char kMetricLabelJob[] = "training_job";              // KUBETRAIN_JOB_NAME
inline constexpr char kMetricLabelNamespace[] = "training_namespace";  // KUBETRAIN_NAMESPACE
inline constexpr char kMetricLabelReplicaType[] = "replica_type";      // KUBETRAIN_REPLICA_TYPE
inline constexpr char kMetricLabelReplicaIndex[] = "replica_index";    // KUBETRAIN_REPLICA_INDEX

// The series status.progress is made of.
inline constexpr char kMetricGlobalStep[] = "kubetrain_global_step";
inline constexpr char kMetricTotalSteps[] = "kubetrain_total_steps";
inline constexpr char kMetricTrainLoss[] = "kubetrain_train_loss";
inline constexpr char kMetricTrainAccuracy[] = "kubetrain_train_accuracy_ratio";
inline constexpr char kMetricEvalAccuracy[] = "kubetrain_eval_accuracy_ratio";
inline constexpr char kMetricSamplesPerSecond[] = "kubetrain_samples_per_second";
// How long an allreduce rank's collective has waited for peers that have
// not joined it (0 until --stall-warning passes): the operator's stall watch.
inline constexpr char kMetricAllreduceStallSeconds[] = "kubetrain_allreduce_stall_seconds";
// The allreduce world this rank trains in: its size and generation (1 when
// it first forms, +1 each time a member is lost, joins or leaves), the
// membership changes it has seen (label kMetricLabelChange), and on rank 0
// one series per current member (label kMetricLabelMember, value 1).
inline constexpr char kMetricWorldSize[] = "kubetrain_world_size";
inline constexpr char kMetricWorldGeneration[] = "kubetrain_world_generation";
inline constexpr char kMetricMembershipChanges[] = "kubetrain_membership_changes_total";
inline constexpr char kMetricWorldMember[] = "kubetrain_world_member";
inline constexpr char kMetricLabelChange[] = "change";  // joined | left | lost
inline constexpr char kMetricLabelMember[] = "member";  // a replica name, "worker-3"

}  // namespace kubetrain::api

#endif  // KUBETRAIN_API_METRIC_NAMES_H_
