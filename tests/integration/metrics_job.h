// MetricsJob: a small job (1 PS + 2 workers, or 2 allreduce workers) of the real
// `kubetrain` binary on a tiny synthetic dataset, with its own free metrics
// port per replica and the environment the operator gives pods
// (KUBETRAIN_JOB_NAME, _NAMESPACE, _REPLICA_TYPE, _REPLICA_INDEX,
// _METRICS_PORT). It trains far longer than any test waits, so tests scrape
// it while it runs and then Stop() it. For integration tests; driven from
// one test thread.
#ifndef KUBETRAIN_TESTS_INTEGRATION_METRICS_JOB_H_
#define KUBETRAIN_TESTS_INTEGRATION_METRICS_JOB_H_

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/support/local_replicas.h"
#include "tests/support/temp_files.h"

namespace kubetrain::testing_util {

class MetricsJob {
 public:
  static constexpr char kJobName[] = "metrics-it";
  static constexpr char kNamespace[] = "kt-test";

  // `num_ps` 0: a worker-only job that exchanges by allreduce.
  explicit MetricsJob(int num_ps = 1);
  ~MetricsJob();  // Stop()s what still runs

  // Starts the PS and both workers; `extra_args` go to every replica.
  void Start(const std::vector<std::string>& extra_args = {});
  // SIGTERM to every replica, then waits; exit codes in replicas().
  void Stop();

  int MetricsPort(const std::string& type, int index) const;
  // One GET of the replica's /metrics.
  absl::StatusOr<std::string> Scrape(const std::string& type, int index) const;
  // Scrapes until `pred(body)` holds or `timeout` passes; the last body (or
  // error) in `last`.
  bool WaitForScrape(const std::string& type, int index,
                     const std::function<bool(const std::string&)>& pred,
                     std::chrono::seconds timeout, std::string* last) const;

  LocalReplicas& replicas() { return replicas_; }
  // type-index pairs of every replica.
  std::vector<std::pair<std::string, int>> All() const {
    if (num_ps_ == 0) return {{"worker", 0}, {"worker", 1}};
    return {{"ps", 0}, {"worker", 0}, {"worker", 1}};
  }

 private:
  const int num_ps_;
  data::testing_util::TempDir dir_;
  LocalReplicas replicas_;
  std::map<std::string, int> metrics_ports_;
  bool running_ = false;
};

}  // namespace kubetrain::testing_util

#endif  // KUBETRAIN_TESTS_INTEGRATION_METRICS_JOB_H_
