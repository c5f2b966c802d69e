// Reconciler: one level-triggered pass over one TrainingJob. It reads the
// job, its pods, services and secret from the informer caches, decides what
// should exist and records its expectations, then acts (creates in parallel
// batches, deletes) and writes status: on the ActionRunner's threads when
// it has one (Reconcile() returns once the requests are handed over), else
// before Reconcile() returns. The status write goes through the /status
// subresource (a conflict means a stale cache: the key is requeued and
// recomputed, never replayed onto the newer object). A pass says when it
// must run again (deadline, TTL) even if nothing else happens. It never trusts an event payload:
// everything comes from the caches and the API.
//
// A pass observes, plans, acts and writes status. Observe: the job's pods
// and Services by replica (job_objects.h) and its status, typed
// (api/job_status.h). Plan, with pure functions tested alone: which pods to
// create, clean up or stop (pod_planner.h), which Services (service_planner.h),
// which replicas failed (failed_replicas.h) and what the failure policy does
// about them (failure_policy.h), pod status readings (pod_status.h), phase,
// deadline, TTL and which status writes may wait (job_phase.h), conditions
// (job_status.h), replica counts and lastFailure (status_planner.h). The
// pass itself orchestrates: it records expectations, events and metrics,
// and acts.
//
// Pod failure policy, in one place (ApplyFailurePolicy):
//   OnFailure/Always: the kubelet restarts containers in place; their
//     restartCount counts toward backoffLimit;
//   ExitCode: exit 128+ (signals, lost peers, eviction) deletes and
//     recreates the pod; 1-127 fails the job;
//   Never: a failed pod fails the job;
//   backoffLimit counts restarts across all replicas; a pod deleted by
//   someone else is recreated and not counted; a succeeded pod is kept and
//   never re-run.
//
// Thread-safe: Reconcile may run concurrently for different keys (the work
// queue never hands out the same key twice at once).
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_RECONCILER_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_RECONCILER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "operator/controller/action_runner.h"
#include "operator/controller/event_recorder.h"
#include "operator/controller/expectations.h"
#include "operator/controller/operator_metrics.h"
#include "operator/controller/replica_builder.h"
#include "operator/controller/stall_tracker.h"
#include "operator/controller/stopped_checkpoints.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/logger.h"
#include "operator/kube/object_cache.h"

namespace kubetrain::controller {

struct ReconcileResult {
  // Set: reconcile again after this long, whatever happens meanwhile.
  std::optional<absl::Duration> requeue_after;
  // The key's requests are with the action runner (this pass's, or an
  // earlier pass's still going out, in which case this pass did nothing):
  // the runner's completion callback reports how they went and queues the
  // key again when needed.
  bool acting = false;
};

struct ReconcilerDeps {
  kube::KubeClient* client = nullptr;
  const kube::ObjectCache* jobs = nullptr;
  const kube::ObjectCache* pods = nullptr;
  const kube::ObjectCache* services = nullptr;
  const kube::ObjectCache* pod_groups = nullptr;  // null unless gang scheduling
  // Nodes (node_loss.h: replicas on lost nodes); null: not watched.
  const kube::ObjectCache* nodes = nullptr;
  Expectations* expectations = nullptr;
  // Runs each pass's requests off the worker; null: Reconcile() runs them.
  ActionRunner* runner = nullptr;
  EventRecorder* events = nullptr;
  OperatorMetrics* metrics = nullptr;
  kube::Logger* logger = nullptr;
  BuildOptions build;
  // Pass time (status timestamps, deadlines, TTLs); wall time of the clock.
  const Clock* clock = nullptr;
  // The progress poller's readings of running jobs (stall_tracker.h), for
  // the Stalled condition and runPolicy.stallPolicy; null: no stall watch.
  StallTracker* stalls = nullptr;
  // Checkpoints stopped replicas reported in pod events (pods a pass may no
  // longer find in the cache); null: only the cached pods are read.
  StoppedCheckpoints* stopped_checkpoints = nullptr;
  // Called with the TrainingJob the API returned after a status write
  // (write-through into the jobs cache); may be empty.
  std::function<void(const kube::Json&)> job_written;
  int max_parallel_creates = 16;
};

// Expectation keys: pods and services of a job are tracked separately.
std::string PodExpectationKey(const std::string& job_key);
std::string ServiceExpectationKey(const std::string& job_key);

class Reconciler {
 public:
  // Every pointer in `deps` must be non-null and outlive the reconciler,
  // except `pod_groups` (null: no gang scheduling), `runner` (null: no
  // runner) and the optional `job_written` callback.
  explicit Reconciler(ReconcilerDeps deps);

  // The Reconcile contract (as controller-runtime's reconcile.Reconciler):
  //   - `job_key` is "<namespace>/<name>"; a job missing from the cache or
  //     being deleted is OK with nothing to do (its expectations are dropped);
  //   - a stored status that does not read (api::StatusFromJson: a field of
  //     the wrong type) is an InvalidArgument error naming the field;
  //   - an error means "this pass did not finish; run it again": the caller
  //     requeues the key with rate-limited backoff (a Conflict is a stale
  //     cache, retried quietly). What the pass did before the error is never
  //     undone: the next pass starts from the caches again (level-triggered);
  //   - with an action runner, OK with `acting` means the outcome of the
  //     pass's requests comes later, through the runner's callback;
  //   - OK with `requeue_after` means "run again after this long even if no
  //     event comes" (deadline, TTL, a backoff wait); the caller resets the
  //     key's backoff and adds it after the delay. OK without it: nothing is
  //     due until an event;
  //   - it never throws: an exception inside becomes an Internal error.
  // Safe to call concurrently for different keys, never for the same key.
  absl::StatusOr<ReconcileResult> Reconcile(const std::string& job_key);

 private:
  absl::StatusOr<ReconcileResult> ReconcileOnce(const std::string& job_key);
  struct Pass;
  // Hands the pass's requests to the runner (or runs them).
  absl::StatusOr<ReconcileResult> Dispatch(const std::shared_ptr<Pass>& pass,
                                           ReconcileResult result);
  ReconcilerDeps deps_;
};

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_RECONCILER_H_
