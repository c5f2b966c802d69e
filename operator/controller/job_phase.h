// The phase and time decisions of a reconcile pass, as pure functions: when
// the job has run past runPolicy.activeDeadlineSeconds, when its
// ttlSecondsAfterFinished is due, what a replica's pod says about that
// replica, and which condition the job moves to (Running, Restarting,
// Succeeded, Failed, or none). The pass (reconciler.cc) carries the decision
// out: it writes the condition (job_status.h), records events and metrics,
// and requeues itself for the wait. Stateless and thread-safe.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_JOB_PHASE_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_JOB_PHASE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "api/job_status.h"
#include "api/replica_policy.h"
#include "api/training_job.h"

namespace kubetrain::controller {

// A limit in time: passed now, or how long until it does; neither when the
// job has no such limit.
struct TimeLimit {
  bool passed = false;
  std::optional<absl::Duration> wait;  // set when not passed and a limit exists
};

// activeDeadlineSeconds, counted from status.startTime (`start`).
TimeLimit ActiveDeadline(const api::RunPolicy& run_policy, absl::Time start, absl::Time now);
// The Failed condition's message for a job past its deadline.
std::string DeadlineExceededMessage(const std::string& job_name, int64_t deadline_seconds);
// ttlSecondsAfterFinished, counted from status.completionTime (`completed`).
TimeLimit TtlAfterFinished(const api::RunPolicy& run_policy, absl::Time completed, absl::Time now);

// A replica's phase from its pod: `pod_phase` is "" when it has no pod;
// `completed` when the replica's index is recorded as succeeded (its pod may
// be gone). A succeeded pod or a completed replica without a pod is
// Succeeded; a Running pod not being deleted is Running; anything else
// (no pod yet, Pending, Failed, being deleted) is Pending.
api::ReplicaPhase ReplicaPhaseOf(const std::string& pod_phase, bool deleting, bool completed);

// Which condition the job moves to.
struct PhaseDecision {
  enum class Kind {
    kNone,        // no condition changes (replicas still pending)
    kRunning,     // every replica that must run is Running, at least one is
    kRestarting,  // a replica failed or restarted in this pass
    kSucceeded,   // the success policy is met
    kFailed,      // a replica failed for good
  };
  Kind kind = Kind::kNone;
  std::string reason;   // the condition's reason
  std::string message;  // the condition's message
};

// Succeeded and Failed (the success policy, DecideJobOutcome) come before
// Restarting (`restarting`: the failure policy restarted a replica in this
// pass), which comes before Running.
PhaseDecision DecidePhase(const api::TrainingJob& job,
                          const std::vector<api::ReplicaState>& replicas, bool restarting);

// True when `computed` differs from `stored` (a job's status) only in what a
// later pass recomputes from the caches anyway: the Created condition,
// startTime, lastReconcileTime, and the active/ready counts and selector of
// replicaStatuses. Such a write may wait while the pass's creates are still
// in flight (their watch events bring the next pass, which writes once);
// anything else (another condition, restarts, succeeded or failed counts,
// completed indexes, completionTime) is written at once, since a later pass
// could not recompute it.
bool StatusWriteCanWait(const api::JobStatus& stored, const api::JobStatus& computed);

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_JOB_PHASE_H_
