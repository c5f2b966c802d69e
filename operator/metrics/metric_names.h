// Every Prometheus metric the `kubetrain-operator` binary exports, in one
// place (ARCHITECTURE.md, house rule 9). deploy/prometheus/alert-rules.yaml
// and the Grafana dashboard under deploy/grafana use these names: renaming
// one breaks them.
#ifndef KUBETRAIN_OPERATOR_METRICS_METRIC_NAMES_H_
#define KUBETRAIN_OPERATOR_METRICS_METRIC_NAMES_H_

namespace kubetrain::operator_metrics {

// Counters with a `training_namespace` label (the TrainingJob's namespace).
inline constexpr char kJobsCreatedTotal[] = "kubetrain_operator_jobs_created_total";
inline constexpr char kJobsSucceededTotal[] = "kubetrain_operator_jobs_succeeded_total";
inline constexpr char kJobsFailedTotal[] = "kubetrain_operator_jobs_failed_total";
inline constexpr char kJobsRestartedTotal[] = "kubetrain_operator_jobs_restarted_total";
inline constexpr char kPodsCreatedTotal[] = "kubetrain_operator_pods_created_total";
// New generations of jobs' runtime worlds (the MembershipChanged event).
inline constexpr char kMembershipChangesTotal[] = "kubetrain_operator_membership_changes_total";
// Also with `reason` (api/failure_reason.h: OOMKilled, Evicted, Preempted,
// NodeLost, LostPeer, ConfigError, ...): replica pods that failed or cannot
// start; Evicted, Preempted and NodeLost are disruptions.
inline constexpr char kReplicaFailuresTotal[] = "kubetrain_operator_replica_failures_total";
inline constexpr char kReasonLabel[] = "reason";

// Gauge: current TrainingJobs per `training_namespace` and `phase` (the latest
// condition type: Created, Running, Restarting, Succeeded, Failed, Suspended).
inline constexpr char kJobs[] = "kubetrain_operator_jobs";

// Reconciles.
inline constexpr char kReconcileDurationSeconds[] = "kubetrain_operator_reconcile_duration_seconds";
inline constexpr char kReconcileErrorsTotal[] = "kubetrain_operator_reconcile_errors_total";

// The work queue (client-go's workqueue metrics, one queue).
inline constexpr char kWorkqueueDepth[] = "kubetrain_operator_workqueue_depth";
inline constexpr char kWorkqueueAddsTotal[] = "kubetrain_operator_workqueue_adds_total";
inline constexpr char kWorkqueueRetriesTotal[] = "kubetrain_operator_workqueue_retries_total";
inline constexpr char kWorkqueueQueueDurationSeconds[] =
    "kubetrain_operator_workqueue_queue_duration_seconds";

// Gauge: 1 while this replica leads (or leader election is off), else 0.
inline constexpr char kIsLeader[] = "kubetrain_operator_is_leader";

// Label names. The jobs' namespace is `training_namespace`, as on the
// runtime's series: `namespace` is the scrape target's (the operator pod's)
// and would turn ours into exported_namespace under a ServiceMonitor.
inline constexpr char kNamespaceLabel[] = "training_namespace";
inline constexpr char kPhaseLabel[] = "phase";

}  // namespace kubetrain::operator_metrics

#endif  // KUBETRAIN_OPERATOR_METRICS_METRIC_NAMES_H_
