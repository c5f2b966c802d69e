// Replicas on a lost node. A node that stops answering leaves its pods
// Running (or Terminating) in the API forever: its kubelet is the only one
// that would report them ended, and the taint manager's eviction (300 s by
// default) only marks them for a deletion that same kubelet must confirm
// (kubeflow/trainer#2072, #2185: a job "Restarting" forever). From the
// operator's Node cache: a pod whose node has not been Ready for
// runPolicy.nodeLostTimeoutSeconds, or whose Node is gone, is lost (a
// NodeLost disruption); a pod still Terminating that long past its
// deletionTimestamp (its grace period's end) is stuck. Either way the
// reconciler force-deletes it (grace 0) so that it can be recreated
// elsewhere. Pure.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_NODE_LOSS_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_NODE_LOSS_H_

#include <optional>

#include "absl/time/time.h"
#include "operator/controller/pod_status.h"
#include "operator/kube/object.h"

namespace kubetrain::controller {

struct NodeLossCheck {
  // The pod's node is lost: the failure to record (reason NodeLost).
  std::optional<PodFailure> lost;
  // The pod is stuck Terminating: force-delete it, nothing to count.
  bool stuck_terminating = false;
  // Not yet, but the node is not Ready (or the pod Terminating): when the
  // timeout will have passed, for a requeue.
  std::optional<absl::Duration> wait;
};

// `node` is the pod's Node from the cache, null when there is none of that
// name; `timeout` > 0. Pods without a node, and finished ones, are never
// lost.
NodeLossCheck CheckNodeLoss(const kube::Json& pod, const kube::Json* node, absl::Duration timeout,
                            absl::Time now);

// The Node's Ready condition is True.
bool NodeReady(const kube::Json& node);

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_NODE_LOSS_H_
