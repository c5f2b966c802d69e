// Pure readings of a Pod's status, as the reconciler needs them: its phase,
// readiness, container restarts, and how a failed pod ended. No API calls, no
// state; stateless and thread-safe. Unknown or missing fields read as the
// zero value (never an exception).
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_POD_STATUS_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_POD_STATUS_H_

#include <optional>
#include <string>

#include "api/checkpoint_message.h"
#include "api/failure_reason.h"
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

// Why a replica's pod ended or cannot start (api/failure_reason.h), with what
// status.lastFailure reports of it.
struct PodFailure {
  api::FailureReason reason = api::FailureReason::kError;
  api::ReplicaExit exit;  // FailedPodExit's (code 0 for a container that never ran)
  std::string detail;     // FailedPodExit's
  std::string node;       // spec.nodeName; "" before the pod was bound
  // The container's termination message (the runtime writes its one-line
  // error there; with terminationMessagePolicy FallbackToLogsOnError the
  // kubelet puts a crash's last log lines there), else the condition's, the
  // waiting container's or the pod's own message; at most kMaxMessage bytes
  // (the end of a longer one).
  std::string message;
  static constexpr size_t kMaxMessage = 1024;
};

// A pod in phase Failed, from what the kubelet and the control plane wrote:
// a DisruptionTarget condition (the scheduler's preemption, the eviction
// API, the taint manager or pod GC for a lost node, the kubelet), the pod's
// reason (Evicted, Preempting, NodeLost, Shutdown, DeadlineExceeded), the
// container's termination (OOMKilled; exit 129: LostPeer; exit 1-127 with a
// "kubetrain: error:" line: ConfigError), else Error.
PodFailure ClassifyFailedPod(const kube::Json& pod);

// The checkpoint a replica stopped by SIGTERM reported in its container's
// termination message (state, else lastState; api/checkpoint_message.h),
// or nullopt.
std::optional<api::CheckpointMessage> StoppedPodCheckpoint(const kube::Json& pod);

// The pod's DisruptionTarget condition is True: the control plane is
// removing it (preemption, eviction, a lost node's taint manager).
bool HasDisruptionTarget(const kube::Json& pod);

// A pod whose container waits for what will not come by itself (an image
// it cannot pull: ImagePullBackOff, ErrImagePull, InvalidImageName; a
// missing Secret or ConfigMap: CreateContainerConfigError); nullopt
// otherwise.
std::optional<PodFailure> StuckPodFailure(const kube::Json& pod);

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_POD_STATUS_H_
