// Pure readings of a Pod's status, as the reconciler needs them: its phase,
// readiness, container restarts, and how a failed pod ended. No API calls, no
// state; stateless and thread-safe. Unknown or missing fields read as the
// zero value (never an exception).
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_POD_STATUS_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_POD_STATUS_H_

#include <string>

#include "api/replica_policy.h"
#include "operator/kube/object.h"

namespace kubetrain::controller {

// status.phase: Pending, Running, Succeeded, Failed, Unknown; "" when unset.
std::string PodPhase(const kube::Json& pod);

// The pod's Ready condition is True.
bool PodReady(const kube::Json& pod);

// The sum of restartCount over the pod's container statuses (the kubelet's
// in-place restarts under OnFailure/Always).
int ContainerRestarts(const kube::Json& pod);

// How a failed pod ended: the replica container's (the first container's)
// terminated exit code, from state or else lastState, with its reason in
// `detail` (" (OOMKilled)"); for a pod the node killed without one (Evicted,
// Preempting, Shutdown, NodeShutdown, Terminated, NodeLost) a retryable 137
// and " (pod Evicted)"; otherwise 1, a permanent failure.
api::ReplicaExit FailedPodExit(const kube::Json& pod, std::string* detail);

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_POD_STATUS_H_
