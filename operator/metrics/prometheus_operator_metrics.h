// PrometheusOperatorMetrics: the controller's OperatorMetrics, and the work
// queue's WorkQueueObserver, as prometheus-cpp metrics in a Registry that
// main.cc serves at /metrics (MetricsEndpoint). Names in metric_names.h.
//
// Every label-less series exists (at 0) from construction, so dashboards and
// alerts see it before the first event; per-namespace series appear with
// their namespace's first event.
//
// Thread-safe. Borrows the registry, which must outlive this object (and
// which keeps the families after it is gone).
#ifndef KUBETRAIN_OPERATOR_METRICS_PROMETHEUS_OPERATOR_METRICS_H_
#define KUBETRAIN_OPERATOR_METRICS_PROMETHEUS_OPERATOR_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "operator/controller/operator_metrics.h"
#include "operator/kube/work_queue.h"

namespace kubetrain::operator_metrics {

// Upper bounds of kubetrain_operator_reconcile_duration_seconds: 1 ms to 10 s.
const prometheus::Histogram::BucketBoundaries& ReconcileBuckets();
// Upper bounds of kubetrain_operator_workqueue_queue_duration_seconds: 1 ms to 60 s.
const prometheus::Histogram::BucketBoundaries& QueueDurationBuckets();

class PrometheusOperatorMetrics final : public controller::OperatorMetrics {
 public:
  explicit PrometheusOperatorMetrics(prometheus::Registry& registry);
  PrometheusOperatorMetrics(const PrometheusOperatorMetrics&) = delete;
  PrometheusOperatorMetrics& operator=(const PrometheusOperatorMetrics&) = delete;

  void JobCreated(const std::string& ns) override;
  void JobSucceeded(const std::string& ns) override;
  void JobFailed(const std::string& ns) override;
  void JobRestarted(const std::string& ns) override;
  void ReplicaFailed(const std::string& ns, const std::string& reason) override;
  void PodCreated(const std::string& ns) override;
  void MembershipChanged(const std::string& ns) override;
  // Replaces every kubetrain_operator_jobs series: (namespace, phase) pairs
  // absent from `counts` are removed, so the gauge never reports jobs that
  // are gone.
  void SetJobPhases(const std::map<std::pair<std::string, std::string>, int>& counts) override;
  void ObserveReconcile(double seconds, bool error) override;
  void SetQueueDepth(int depth) override;
  void SetLeader(bool leader) override;

  // Feeds kubetrain_operator_workqueue_{depth,adds_total,retries_total,
  // queue_duration_seconds}; for the controller's WorkQueue. Lives as long
  // as this object.
  kube::WorkQueueObserver* queue_observer() { return &queue_observer_; }

 private:
  class QueueObserver final : public kube::WorkQueueObserver {
   public:
    explicit QueueObserver(PrometheusOperatorMetrics& metrics) : metrics_(metrics) {}
    void OnDepth(int depth) override { metrics_.SetQueueDepth(depth); }
    void OnAdd() override { metrics_.workqueue_adds_.Increment(); }
    void OnRetry() override { metrics_.workqueue_retries_.Increment(); }
    void OnLatency(absl::Duration queued_for) override {
      metrics_.queue_duration_.Observe(absl::ToDoubleSeconds(queued_for));
    }

   private:
    PrometheusOperatorMetrics& metrics_;
  };

  // prometheus-cpp's families and metrics are thread-safe on their own.
  prometheus::Family<prometheus::Counter>& jobs_created_;
  prometheus::Family<prometheus::Counter>& jobs_succeeded_;
  prometheus::Family<prometheus::Counter>& jobs_failed_;
  prometheus::Family<prometheus::Counter>& jobs_restarted_;
  prometheus::Family<prometheus::Counter>& pods_created_;
  prometheus::Family<prometheus::Counter>& membership_changes_;
  prometheus::Family<prometheus::Counter>& replica_failures_;
  prometheus::Family<prometheus::Gauge>& jobs_;
  prometheus::Histogram& reconcile_duration_;
  prometheus::Counter& reconcile_errors_;
  prometheus::Gauge& workqueue_depth_;
  prometheus::Counter& workqueue_adds_;
  prometheus::Counter& workqueue_retries_;
  prometheus::Histogram& queue_duration_;
  prometheus::Gauge& is_leader_;
  QueueObserver queue_observer_{*this};

  // Serialises SetJobPhases; the series it last set.
  absl::Mutex phases_mu_;
  std::map<std::pair<std::string, std::string>, prometheus::Gauge*> phase_series_
      ABSL_GUARDED_BY(phases_mu_);
};

}  // namespace kubetrain::operator_metrics

#endif  // KUBETRAIN_OPERATOR_METRICS_PROMETHEUS_OPERATOR_METRICS_H_
