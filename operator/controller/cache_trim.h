// What the controller keeps of the Pods and Services it caches: only the
// fields it reads (controller-runtime's cache TransformFunc), so 2,000 Pods
// of 500 jobs do not hold their whole spec (container env, TF_CONFIG,
// volumes, the server's defaults) in the informer's JSON trees.
//
// Kept of every object: metadata's name, namespace, uid, resourceVersion,
// labels, annotations, ownerReferences, creationTimestamp and
// deletionTimestamp (keys, indexes, owner checks, the progress poller's
// metrics annotations). Of a Pod also: each container's name (exit codes
// are read for the first container, pod_status.h) and, of its status,
// phase, reason, podIP, the conditions' type and status, and each container
// status's name, restartCount and state/lastState.terminated exitCode and
// reason. Of a Service nothing more. Of a Node (node_loss.h) its Ready
// condition's status, reason, message and lastTransitionTime, and not its
// heartbeat times. Add a field here before reading it from a cache.
//
// Pure functions; thread-safe.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_CACHE_TRIM_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_CACHE_TRIM_H_

#include <nlohmann/json.hpp>

namespace kubetrain::controller {

void TrimCachedPod(nlohmann::json& pod);
void TrimCachedService(nlohmann::json& service);
void TrimCachedNode(nlohmann::json& node);

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_CACHE_TRIM_H_
