// TrainingJobController: the operator's control loop. Informers on
// TrainingJobs and on the Pods, Services and Secrets they own feed a
// rate-limited work queue of job keys; N workers run the Reconciler on each
// key (level-triggered: every run reads the cache, diffs, decides, and asks
// for a delayed requeue when a deadline or TTL is due), and an ActionRunner's
// threads send the requests each pass decided on.
//
// Thread-safe: Start/Stop/Ready from any thread.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_TRAINING_JOB_CONTROLLER_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_TRAINING_JOB_CONTROLLER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "operator/controller/action_runner.h"
#include "operator/controller/operator_metrics.h"
#include "operator/controller/progress_poller.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/logger.h"
#include "operator/kube/work_queue.h"

namespace kubetrain::controller {

struct ControllerOptions {
  std::string watch_namespace;  // "" = all namespaces
  int workers = 16;             // chosen by measurement: docs/benchmarks.md
  // Threads that send the passes' requests (ActionRunner), so workers do
  // not wait for round trips or the client rate limit; 0: the workers send
  // them themselves (before issue 15's runner).
  int action_threads = 16;
  std::string gang_scheduler;  // "" or "volcano"
  // Watch Nodes (list/watch, cluster-scoped) to recreate replicas on lost
  // nodes (node_loss.h); off for a namespaced install, which cannot.
  bool watch_nodes = true;
  absl::Duration resync_period = absl::Minutes(10);
  // How often status.progress is refreshed from the chief's metrics, and
  // every replica's read for the Stalled condition (0: off).
  absl::Duration progress_interval = absl::Seconds(30);
  // Tests: reads the replicas' metrics instead of libcurl; borrowed.
  MetricsFetcher* metrics_fetcher = nullptr;
  absl::Duration sync_timeout = absl::Minutes(2);  // informers' first list
  // Work-queue metrics (depth, adds, retries, latencies); may be null.
  kube::WorkQueueObserver* queue_observer = nullptr;
  // How long the passes' requests waited and ran; may be null.
  ActionObserver* action_observer = nullptr;
};

class TrainingJobController {
 public:
  // Borrows everything; all must outlive the controller.
  TrainingJobController(kube::KubeClient& client, ControllerOptions options,
                        OperatorMetrics* metrics, const Clock& clock, kube::Logger* logger);
  ~TrainingJobController();  // Stop()
  TrainingJobController(const TrainingJobController&) = delete;
  TrainingJobController& operator=(const TrainingJobController&) = delete;

  // Starts informers, waits for their first list (error on timeout), then
  // the workers. Returns once running. Returns Cancelled when Stop() came
  // first or arrived while the informers were syncing.
  absl::Status Start();
  // Stops taking work (queued keys and plans not started are dropped: the
  // next run reconciles every job again), lets in-flight reconciles and
  // plans finish, stops informers.
  // Safe while Start() runs on another thread; after Stop(), Start() refuses.
  void Stop();
  // True once every informer has synced and workers run (readiness probe).
  bool Ready() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_TRAINING_JOB_CONTROLLER_H_
