#include "operator/metrics/prometheus_operator_metrics.h"

#include <vector>

#include "operator/metrics/metric_names.h"

namespace kubetrain::operator_metrics {
namespace {

prometheus::Family<prometheus::Counter>& CounterFamily(prometheus::Registry& r, const char* name,
                                                       const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r);
}

prometheus::Family<prometheus::Gauge>& GaugeFamily(prometheus::Registry& r, const char* name,
                                                   const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r);
}

prometheus::Family<prometheus::Histogram>& HistogramFamily(prometheus::Registry& r,
                                                           const char* name, const char* help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(r);
}

prometheus::Labels Namespace(const std::string& ns) { return {{kNamespaceLabel, ns}}; }

}  // namespace

const prometheus::Histogram::BucketBoundaries& ReconcileBuckets() {
  static const auto* const kBuckets = new prometheus::Histogram::BucketBoundaries{
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  return *kBuckets;
}

const prometheus::Histogram::BucketBoundaries& QueueDurationBuckets() {
  static const auto* const kBuckets = new prometheus::Histogram::BucketBoundaries{
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  return *kBuckets;
}

PrometheusOperatorMetrics::PrometheusOperatorMetrics(prometheus::Registry& registry)
    : jobs_created_(CounterFamily(registry, kJobsCreatedTotal,
                                  "TrainingJobs seen for the first time by the operator")),
      jobs_succeeded_(CounterFamily(registry, kJobsSucceededTotal,
                                    "TrainingJobs that reached the Succeeded condition")),
      jobs_failed_(CounterFamily(registry, kJobsFailedTotal,
                                 "TrainingJobs that reached the Failed condition")),
      jobs_restarted_(CounterFamily(registry, kJobsRestartedTotal,
                                    "Replica restarts the operator performed for TrainingJobs")),
      pods_created_(
          CounterFamily(registry, kPodsCreatedTotal, "Pods the operator created for TrainingJobs")),
      membership_changes_(CounterFamily(registry, kMembershipChangesTotal,
                                        "New generations of TrainingJobs' runtime worlds (a "
                                        "worker lost, joined or left)")),
      replica_failures_(CounterFamily(registry, kReplicaFailuresTotal,
                                      "Replica pods that failed or cannot start, by reason "
                                      "(Evicted, Preempted and NodeLost are disruptions)")),
      jobs_(GaugeFamily(registry, kJobs,
                        "Current TrainingJobs by namespace and phase (latest condition type)")),
      reconcile_duration_(HistogramFamily(registry, kReconcileDurationSeconds,
                                          "Time one reconcile of a TrainingJob took")
                              .Add({}, ReconcileBuckets())),
      reconcile_errors_(
          CounterFamily(registry, kReconcileErrorsTotal, "Reconciles that returned an error")
              .Add({})),
      workqueue_depth_(
          GaugeFamily(registry, kWorkqueueDepth, "TrainingJob keys waiting in the work queue")
              .Add({})),
      workqueue_adds_(
          CounterFamily(registry, kWorkqueueAddsTotal, "Keys added to the work queue").Add({})),
      workqueue_retries_(CounterFamily(registry, kWorkqueueRetriesTotal,
                                       "Delayed and rate-limited re-adds to the work queue")
                             .Add({})),
      queue_duration_(HistogramFamily(registry, kWorkqueueQueueDurationSeconds,
                                      "Time a key waited in the work queue before a worker took it")
                          .Add({}, QueueDurationBuckets())),
      is_leader_(GaugeFamily(registry, kIsLeader,
                             "1 while this operator replica leads (or leader election is off), "
                             "else 0")
                     .Add({})) {}

void PrometheusOperatorMetrics::JobCreated(const std::string& ns) {
  jobs_created_.Add(Namespace(ns)).Increment();
}
void PrometheusOperatorMetrics::JobSucceeded(const std::string& ns) {
  jobs_succeeded_.Add(Namespace(ns)).Increment();
}
void PrometheusOperatorMetrics::JobFailed(const std::string& ns) {
  jobs_failed_.Add(Namespace(ns)).Increment();
}
void PrometheusOperatorMetrics::JobRestarted(const std::string& ns) {
  jobs_restarted_.Add(Namespace(ns)).Increment();
}
void PrometheusOperatorMetrics::ReplicaFailed(const std::string& ns, const std::string& reason) {
  replica_failures_.Add({{kNamespaceLabel, ns}, {kReasonLabel, reason}}).Increment();
}
void PrometheusOperatorMetrics::PodCreated(const std::string& ns) {
  pods_created_.Add(Namespace(ns)).Increment();
}

void PrometheusOperatorMetrics::MembershipChanged(const std::string& ns) {
  membership_changes_.Add(Namespace(ns)).Increment();
}

void PrometheusOperatorMetrics::SetJobPhases(
    const std::map<std::pair<std::string, std::string>, int>& counts) {
  absl::MutexLock lock(&phases_mu_);
  std::vector<std::pair<std::string, std::string>> gone;
  for (const auto& [key, gauge] : phase_series_) {
    if (counts.find(key) == counts.end()) gone.push_back(key);
  }
  for (const auto& key : gone) {
    jobs_.Remove(phase_series_[key]);
    phase_series_.erase(key);
  }
  for (const auto& [key, count] : counts) {
    auto it = phase_series_.find(key);
    if (it == phase_series_.end()) {
      prometheus::Gauge& g = jobs_.Add({{kNamespaceLabel, key.first}, {kPhaseLabel, key.second}});
      it = phase_series_.emplace(key, &g).first;
    }
    it->second->Set(count);
  }
}

void PrometheusOperatorMetrics::ObserveReconcile(double seconds, bool error) {
  reconcile_duration_.Observe(seconds);
  if (error) reconcile_errors_.Increment();
}

void PrometheusOperatorMetrics::SetQueueDepth(int depth) { workqueue_depth_.Set(depth); }

void PrometheusOperatorMetrics::SetLeader(bool leader) { is_leader_.Set(leader ? 1 : 0); }

}  // namespace kubetrain::operator_metrics
