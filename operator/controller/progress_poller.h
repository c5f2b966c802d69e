// ProgressPoller: fills `status.progress` of running TrainingJobs from the
// chief replica's Prometheus metrics endpoint.
//
// Every interval, for each job whose phase (the type of its last True
// condition) is Running or Restarting, it finds the chief pod (label
// kubetrain.io/job-role=chief, controlled by the job, phase Running,
// status.podIP set), GETs http://<podIP>:<prometheus.io/port or api::kMetricsPort>
// <prometheus.io/path or /metrics>, reads
//   step             kubetrain_global_step
//   totalSteps       kubetrain_total_steps
//   loss             kubetrain_train_loss
//   accuracy         kubetrain_eval_accuracy_ratio, else kubetrain_train_accuracy_ratio
//   samplesPerSecond kubetrain_samples_per_second
// and the runtime's world (world_membership.h)
//   status.worldSize   kubetrain_world_size
//   status.generation  kubetrain_world_generation
// (names in api/metric_names.h) from samples whose training_job,
// training_namespace, replica_type and replica_index labels match
// the pod (an absent label matches), and merge-patches
//   status.progress {step, totalSteps, loss, accuracy, samplesPerSecond, updatedAt}
// (with worldSize and generation when they changed) on the job's /status
// subresource. A write of a new generation calls on_membership_change, with
// the members joined and left since the generation this poller saw before
// (none named after an operator restart: the members are not stored). A metric that is missing (or
// not finite) removes its field. Nothing is written when the values equal the job's current
// progress. A failed fetch, parse or write leaves the old progress and logs one warning per job per
// failure streak; the first success after a streak logs at info.
//
// The caches are read, never written: pass the informers' caches for
// TrainingJobs and for Pods (owner index kIndexOwnerUid is used).
// Thread-safe: PollOnce may run from several threads, and Start/Stop from
// any thread.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_PROGRESS_POLLER_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_PROGRESS_POLLER_H_

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/job_status.h"
#include "base/clock.h"
#include "operator/controller/prometheus_text.h"
#include "operator/controller/stall_tracker.h"
#include "operator/controller/world_membership.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/logger.h"
#include "operator/kube/object_cache.h"

namespace kubetrain::controller {

// Fetches a URL's body. Implementations are thread-safe.
class MetricsFetcher {
 public:
  virtual ~MetricsFetcher() = default;
  // The body of a 2xx answer; Unavailable for network errors, timeouts and
  // other HTTP codes (the message says which).
  virtual absl::StatusOr<std::string> Fetch(const std::string& url) = 0;
};

// libcurl, one easy handle per call, with `timeout` for the whole transfer
// and bodies capped at 16 MiB.
std::unique_ptr<MetricsFetcher> NewCurlMetricsFetcher(absl::Duration timeout);

struct ProgressPollerOptions {
  absl::Duration interval = absl::Seconds(30);
  int max_parallel = 8;  // concurrent fetches in one PollOnce
  // The stall watch (stall_tracker.h): each round also reads every running
  // replica (chief, workers, parameter servers) of each running job whose
  // runPolicy.stallTimeoutSeconds is not 0 into `stalls`, on `clock`, and
  // calls `on_stall_change` with the job's key when its verdict (stalled
  // or not) changes. Off while `stalls` is null.
  StallTracker* stalls = nullptr;
  const Clock* clock = nullptr;
  std::function<void(const std::string& job_key)> on_stall_change;
  // Called with the job (as cached) after status.generation was written
  // with a new generation of its world (world_membership.h): the
  // MembershipChanged event and its counter. May be empty.
  std::function<void(const nlohmann::json& job, const MembershipChange& change)>
      on_membership_change;
};

// True when the job's Running or Restarting condition is True and it is
// not Succeeded, Failed or Suspended (Stalled or Unschedulable may be the
// phase shown meanwhile).
bool IsJobRunning(const nlohmann::json& job);

// The progress in `page` for the replica `pod` runs (see the header comment
// for which samples count); `job_name` is the expected job label, the
// namespace label must equal the pod's namespace. Fields whose metric is
// absent stay unset; updated_at is left empty.
api::Progress ProgressFromMetrics(const PrometheusExposition& page, const nlohmann::json& pod,
                                  const std::string& job_name);

// The metrics URL of a pod: http://<podIP>:<port annotation or api::kMetricsPort><path
// annotation or /metrics>; empty when the pod has no IP.
std::string MetricsUrl(const nlohmann::json& pod);

class ProgressPoller {
 public:
  // Borrows everything; all must outlive this. `logger` may be null.
  ProgressPoller(kube::KubeClient& client, const kube::ObjectCache& jobs,
                 const kube::ObjectCache& pods, MetricsFetcher& fetcher,
                 ProgressPollerOptions options, kube::Logger* logger);
  ~ProgressPoller();  // Stop()
  ProgressPoller(const ProgressPoller&) = delete;
  ProgressPoller& operator=(const ProgressPoller&) = delete;

  // Starts a thread that calls PollOnce every interval (the first at once;
  // intervals under 10 ms count as 10 ms). No-op when started.
  void Start();
  // Stops the thread; returns once a PollOnce in progress finishes (its
  // fetches are bounded by the fetcher's timeout).
  void Stop();

  // One round over every running job; returns how many jobs' progress was
  // written.
  int PollOnce();

 private:
  struct Target {
    std::string key;  // job ns/name
    std::string uid;
    nlohmann::json job;
    nlohmann::json pod;
  };
  // Fetches, parses and writes one job's progress; true when written.
  bool PollJob(const Target& target);
  // Reads every running replica of `job` into the stall tracker.
  void WatchJob(const kube::ObjectPtr& job);
  std::optional<Target> TargetFor(const kube::ObjectPtr& job) const;
  // Logs a failure once per streak.
  void NoteFailure(const Target& target, const absl::Status& status);
  void NoteSuccess(const Target& target);
  // Keeps the members of the generation `world` shows (when it names any).
  void RememberMembers(const std::string& uid, const WorldReading& world) ABSL_LOCKS_EXCLUDED(mu_);
  void NoteSuccessLocked(const Target& target) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Run();
  void Log(kube::LogLevel level, const std::string& message);

  kube::KubeClient& client_;
  const kube::ObjectCache& jobs_;
  const kube::ObjectCache& pods_;
  MetricsFetcher& fetcher_;
  const ProgressPollerOptions options_;
  kube::Logger* const logger_;

  absl::Mutex mu_;
  // Job uid -> in a failure streak.
  absl::flat_hash_map<std::string, bool> failing_ ABSL_GUARDED_BY(mu_);
  // Job uid -> the stall verdict last told (on_stall_change).
  absl::flat_hash_map<std::string, bool> stalled_ ABSL_GUARDED_BY(mu_);
  // Job uid -> (resourceVersion the cache held when we wrote, what we wrote):
  // skips a repeated write while the informer has not yet seen ours.
  absl::flat_hash_map<std::string, std::pair<std::string, nlohmann::json>> written_
      ABSL_GUARDED_BY(mu_);
  // Job uid -> the members of the latest generation read.
  absl::flat_hash_map<std::string, std::set<std::string>> members_ ABSL_GUARDED_BY(mu_);

  absl::Mutex lifecycle_mu_;  // serialises Start and Stop
  std::thread thread_ ABSL_GUARDED_BY(lifecycle_mu_);
  absl::Mutex run_mu_ ABSL_ACQUIRED_AFTER(lifecycle_mu_);
  bool stopping_ ABSL_GUARDED_BY(run_mu_) = false;
};

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_PROGRESS_POLLER_H_
