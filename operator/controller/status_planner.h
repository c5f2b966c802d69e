// The parts of a TrainingJob's status (api/job_status.h) a reconcile pass
// derives from the observed pods, as pure functions: the replica counts
// (replicaStatuses), each replica's state for the phase decision
// (job_phase.h), status.lastFailure and status.lastCheckpoint, and which
// pods a suspended job still waits for. Conditions are job_status.h's;
// which writes may wait, job_phase.h's. Stateless and thread-safe.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_STATUS_PLANNER_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_STATUS_PLANNER_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "api/checkpoint_message.h"
#include "api/job_status.h"
#include "api/replica_policy.h"
#include "api/training_job.h"
#include "operator/controller/failure_policy.h"
#include "operator/controller/job_objects.h"

namespace kubetrain::controller {

// replicaStatuses of every type in the spec: active (a pod neither finished
// nor being deleted), ready, succeeded (completed indexes, kept across pod
// deletions), failed, the selector; restarts is kept as counted.
void ComputeReplicaStatuses(const api::TrainingJob& job, const ReplicaObjects& pods,
                            api::JobStatus& status);

// Every replica of the spec with its phase (job_phase.h ReplicaPhaseOf),
// for DecidePhase.
std::vector<api::ReplicaState> ReplicaStates(const api::TrainingJob& job,
                                             const ReplicaObjects& pods,
                                             const api::JobStatus& status);

// status.lastFailure := `f` at `now` (replica, pod, uid, node, the exit code
// unless the pod did not exit, reason, message). False, and nothing
// changes, when it already holds this pod's failure for this reason, so a
// pod stuck for many passes is reported once.
bool RecordLastFailure(api::JobStatus& status, const FailedReplica& f, const std::string& now);

// status.lastCheckpoint := `m`, reported by `replica` ("worker-0"), seen at
// `now`, unless it already holds a checkpoint at a later step or this one.
// Returns whether it changed.
bool RecordLastCheckpoint(api::JobStatus& status, const std::string& replica,
                          const api::CheckpointMessage& m, const std::string& now);

// RecordLastCheckpoint for each pod of `pods` whose container reported a
// checkpoint when it was stopped (pod_status.h StoppedPodCheckpoint).
bool RecordStoppedPodCheckpoints(api::JobStatus& status, const ReplicaObjects& pods,
                                 const std::string& now);

// The pods a suspended job still waits for before it counts as suspended:
// those neither Succeeded nor Failed, unless being deleted past the end of
// their grace period (deletionTimestamp; a pod stuck there is the node-loss
// check's), so that their replicas can write their checkpoints first.
struct SuspendWait {
  std::vector<std::string> pods;       // names, in replica order
  std::optional<absl::Duration> wait;  // until the soonest grace period ends
};
SuspendWait PodsStillStopping(const ReplicaObjects& pods, absl::Time now);

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_STATUS_PLANNER_H_
