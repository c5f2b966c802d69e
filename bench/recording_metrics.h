// Shared by the operator benches: OperatorMetrics that records every
// reconcile's latency and counts pod creations, and percentiles. Thread-safe.
#ifndef KUBETRAIN_BENCH_RECORDING_METRICS_H_
#define KUBETRAIN_BENCH_RECORDING_METRICS_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "operator/controller/operator_metrics.h"

namespace kubetrain::bench {

class RecordingMetrics final : public controller::OperatorMetrics {
 public:
  void JobCreated(const std::string&) override {}
  void JobSucceeded(const std::string&) override {}
  void JobFailed(const std::string&) override {}
  void JobRestarted(const std::string&) override {}
  void ReplicaFailed(const std::string&, const std::string&) override {}
  void PodCreated(const std::string&) override { ++pods_; }
  void SetJobPhases(const std::map<std::pair<std::string, std::string>, int>&) override {}
  void ObserveReconcile(double seconds, bool error) override {
    absl::MutexLock lock(&mu_);
    latencies_.push_back(seconds);
    if (error) ++errors_;
    last_ = std::chrono::steady_clock::now();
  }
  void SetQueueDepth(int) override {}
  void SetLeader(bool) override {}

  int pods() const { return pods_.load(); }
  std::vector<double> Latencies(int* errors) const {
    absl::MutexLock lock(&mu_);
    *errors = errors_;
    return latencies_;
  }
  double SecondsSinceLastReconcile() const {
    absl::MutexLock lock(&mu_);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - last_).count();
  }

 private:
  std::atomic<int> pods_{0};
  mutable absl::Mutex mu_;
  std::vector<double> latencies_ ABSL_GUARDED_BY(mu_);
  int errors_ ABSL_GUARDED_BY(mu_) = 0;
  std::chrono::steady_clock::time_point last_ ABSL_GUARDED_BY(mu_) =
      std::chrono::steady_clock::now();
};

inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace kubetrain::bench

#endif  // KUBETRAIN_BENCH_RECORDING_METRICS_H_
