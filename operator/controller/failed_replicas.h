// Which replicas failed, read from the observed pods (job_objects.h), for
// the failure policy (failure_policy.h DecideFailures) to decide on:
//   - a pod that ended Failed, classified (pod_status.h);
//   - a pod the control plane is deleting for a disruption (its
//     DisruptionTarget condition: preemption, eviction, the taint manager),
//     decided once: not again while status.lastFailure names its uid;
//   - a pod on a node lost for runPolicy.nodeLostTimeoutSeconds
//     (node_loss.h), to be force-deleted;
// and, apart, pods waiting for what will not come by itself (an image, a
// Secret): reported, left to the kubelet. Pods still Terminating long past
// their grace period are found by FindStuckTerminating. Pure decisions;
// stateless and thread-safe.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_FAILED_REPLICAS_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_FAILED_REPLICAS_H_

#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "api/job_status.h"
#include "api/training_job.h"
#include "operator/controller/failure_policy.h"
#include "operator/controller/job_objects.h"
#include "operator/kube/object_cache.h"

namespace kubetrain::controller {

// runPolicy.nodeLostTimeoutSeconds (its default when unset); unset when
// Nodes are not watched or the timeout is 0 (never).
std::optional<absl::Duration> NodeLostTimeout(const api::RunPolicy& run_policy, bool nodes_watched);

struct FailedReplicas {
  std::vector<FailedReplica> failed;   // in replica order
  std::vector<kube::ObjectPtr> pods;   // failed[i]'s pod
  std::vector<bool> force;             // failed[i]'s node is lost: delete with grace 0
  std::vector<FailedReplica> stuck;    // to report only
  std::optional<absl::Duration> wait;  // when the next node-loss timeout passes
};

// `nodes`: the Node cache, null when not watched (then `node_lost_timeout`
// is unset too).
FailedReplicas FindFailedReplicas(const api::TrainingJob& job, const ReplicaObjects& pods,
                                  const api::JobStatus& status, const kube::ObjectCache* nodes,
                                  std::optional<absl::Duration> node_lost_timeout, absl::Time now);

struct StuckTerminating {
  std::vector<kube::ObjectPtr> pods;   // to force-delete
  std::optional<absl::Duration> wait;  // when the next one will be
};

// Pods still Terminating `timeout` past their grace period: their kubelet is
// gone and will never confirm the deletion.
StuckTerminating FindStuckTerminating(const ReplicaObjects& pods, absl::Duration timeout,
                                      absl::Time now);

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_FAILED_REPLICAS_H_
