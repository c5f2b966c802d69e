// The failure policy of one reconcile pass, as a pure decision: given the
// restarts so far and the pass's failed pods (each with its exit and its
// replica's restart policy), which pods to restart and whether the job
// fails (BackoffLimitExceeded, ReplicaFailed). The reconciler carries the
// decision out (deletes pods, counts restarts, records events).
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_FAILURE_POLICY_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_FAILURE_POLICY_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "api/replica_policy.h"
#include "api/training_job.h"

namespace kubetrain::controller {

// A pod of the job in phase Failed (not being deleted).
struct FailedReplica {
  api::ReplicaType type = api::ReplicaType::kWorker;
  int index = 0;
  std::string pod_name;
  api::ReplicaExit exit;
  std::string detail;  // appended to exit.Describe(), e.g. " (OOMKilled)"
  api::RestartPolicy policy = api::RestartPolicy::kNever;
};

// "worker-1 (pod p) exited with code 3<detail>", for messages and events.
std::string DescribeFailure(const FailedReplica& failed);

struct JobFailure {
  std::string reason;
  std::string message;
};

struct FailureDecision {
  // Indexes into the failed pods to restart, in order, before `fail` (if any).
  std::vector<size_t> restart;
  std::optional<JobFailure> fail;
};

// `total_restarts`: restarts counted so far (recreations + in-place
// container restarts). Pods are considered in the given order; the first one
// that fails the job ends the decision.
FailureDecision DecideFailures(const std::string& job_name, const api::RunPolicy& run_policy,
                               int total_restarts, const std::vector<FailedReplica>& failed);

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_FAILURE_POLICY_H_
