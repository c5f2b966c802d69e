// The failure policy of one reconcile pass, as a pure decision: given the
// restarts and disruptions so far and the pass's failed pods (each with its
// exit, why it ended and its replica's restart policy), which pods to
// recreate as disruptions (Evicted, Preempted, NodeLost: not counted toward
// backoffLimit, up to runPolicy.maxDisruptions, whatever the restart
// policy), which to restart and whether the job fails
// (BackoffLimitExceeded, ReplicaFailed). The reconciler carries the
// decision out (deletes pods, counts restarts, records events).
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_FAILURE_POLICY_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_FAILURE_POLICY_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "api/failure_reason.h"
#include "api/replica_policy.h"
#include "api/training_job.h"

namespace kubetrain::controller {

// A pod of the job in phase Failed (not being deleted).
struct FailedReplica {
  api::ReplicaType type = api::ReplicaType::kWorker;
  int index = 0;
  std::string pod_name;
  std::string pod_uid;
  // The pod is already being deleted (by the control plane: a preemption,
  // an eviction): nothing to delete, only to record and recreate.
  bool deleting = false;
  // What happened, when the container did not end by itself ("was lost
  // with its node"): said instead of the exit, and no exit code reported.
  std::string state;
  api::ReplicaExit exit;  // for the decision (a lost node's: a retryable 137)
  std::string detail;     // appended to exit.Describe(), e.g. " (OOMKilled)"
  api::RestartPolicy policy = api::RestartPolicy::kNever;
  api::FailureReason reason = api::FailureReason::kError;
  std::string node;     // "" when unknown
  std::string message;  // the termination message, or the control plane's
};

// "worker-1 (pod p on node-b) exited with code 3<detail> [ConfigError]:
// <message>", for messages and events.
std::string DescribeFailure(const FailedReplica& failed);

struct JobFailure {
  std::string reason;
  std::string message;
};

struct FailureDecision {
  // Indexes into the failed pods to recreate, in order, before `fail` (if
  // any): disruptions (not counted), and restarts (counted).
  std::vector<size_t> disrupted;
  std::vector<size_t> restart;
  std::optional<JobFailure> fail;
};

// runPolicy.maxDisruptions, defaulted: disruptions recreated without
// counting toward backoffLimit.
int MaxDisruptions(const api::RunPolicy& run_policy);

// `total_restarts`: restarts counted so far (recreations + in-place
// container restarts); `disruptions`: disruptions recreated so far. Pods are
// considered in the given order; the first one that fails the job ends the
// decision. A disruption past maxDisruptions is decided as any failure.
FailureDecision DecideFailures(const std::string& job_name, const api::RunPolicy& run_policy,
                               int total_restarts, int disruptions,
                               const std::vector<FailedReplica>& failed);

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_FAILURE_POLICY_H_
