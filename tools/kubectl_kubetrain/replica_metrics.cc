#include "tools/kubectl_kubetrain/replica_metrics.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/metrics/metric_names.h"

namespace kubetrain::kubectl_plugin {
namespace {

// The first finite sample named `name` (with label `key`=`value` when `key`
// is set).
std::optional<double> Sample(const controller::PrometheusExposition& page, const std::string& name,
                             const std::string& key = "", const std::string& value = "") {
  for (const controller::PrometheusSample& s : page.samples) {
    if (s.name != name || !std::isfinite(s.value)) continue;
    if (!key.empty()) {
      auto it = s.labels.find(key);
      if (it == s.labels.end() || it->second != value) continue;
    }
    return s.value;
  }
  return std::nullopt;
}

}  // namespace

ReplicaMetrics ReadReplicaMetrics(const controller::PrometheusExposition& page,
                                  const ReplicaMetrics* previous) {
  ReplicaMetrics out;
  if (auto step = Sample(page, metrics::kGlobalStep.name)) {
    out.step = static_cast<int64_t>(std::llround(*step));
  }
  out.samples_per_second = Sample(page, metrics::kSamplesPerSecond.name);
  out.stall_seconds = Sample(page, metrics::kAllreduceStallSeconds.name);
  if (auto peers = Sample(page, metrics::kStalledPeers.name)) {
    out.stalled_peers = static_cast<int>(std::llround(*peers));
  }
  out.step_seconds_sum = Sample(page, absl::StrCat(metrics::kStepDuration.name, "_sum"));
  out.exchange_seconds_sum = Sample(page, absl::StrCat(metrics::kStepPhaseDuration.name, "_sum"),
                                    metrics::kLabelPhase, "exchange");
  if (out.step_seconds_sum && out.exchange_seconds_sum) {
    double step = *out.step_seconds_sum;
    double exchange = *out.exchange_seconds_sum;
    out.exchange_share_since_start = true;
    if (previous != nullptr && previous->step_seconds_sum && previous->exchange_seconds_sum &&
        *out.step_seconds_sum > *previous->step_seconds_sum &&
        *out.exchange_seconds_sum >= *previous->exchange_seconds_sum) {
      // Sums that went back belong to a restarted replica: use them whole.
      step -= *previous->step_seconds_sum;
      exchange -= *previous->exchange_seconds_sum;
      out.exchange_share_since_start = false;
    }
    if (step > 0) out.exchange_share = std::min(1.0, std::max(0.0, exchange / step));
  }
  return out;
}

}  // namespace kubetrain::kubectl_plugin
