// What `kubectl kubetrain top` shows of one replica, computed from its
// runtime's Prometheus page (runtime/metrics/metric_names.h):
//   step            kubetrain_global_step
//   samples/s       kubetrain_samples_per_second
//   exchange share  kubetrain_step_phase_duration_seconds_sum{phase="exchange"} over
//                   kubetrain_step_duration_seconds_sum: since the previous page
//                   when one is given and steps ran in between, else since start
//   stall           kubetrain_allreduce_stall_seconds
//   stalled peers   kubetrain_stalled_peers
// A family the replica does not export (a PS has no steps) stays nullopt.
// Pure functions; thread-safe.
#ifndef KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_REPLICA_METRICS_H_
#define KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_REPLICA_METRICS_H_

#include <cstdint>
#include <optional>

#include "operator/controller/prometheus_text.h"

namespace kubetrain::kubectl_plugin {

struct ReplicaMetrics {
  std::optional<int64_t> step;
  std::optional<double> samples_per_second;
  std::optional<double> exchange_share;     // 0..1 of step time
  bool exchange_share_since_start = false;  // no interval to compute it over
  std::optional<double> stall_seconds;
  std::optional<int> stalled_peers;
  // The running sums the share is computed from, kept for the next page.
  std::optional<double> step_seconds_sum;
  std::optional<double> exchange_seconds_sum;
};

ReplicaMetrics ReadReplicaMetrics(const controller::PrometheusExposition& page,
                                  const ReplicaMetrics* previous);

}  // namespace kubetrain::kubectl_plugin

#endif  // KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_REPLICA_METRICS_H_
