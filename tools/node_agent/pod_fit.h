// The node agent's scheduler decisions, pure over Pod JSON: what a pod
// requests, whether it still counts against the node, and whether it fits
// next to the pods already bound there (the kube-scheduler's
// NodeResourcesFit filter on CPU, memory and pod count). Free functions;
// thread-safe.
#ifndef KUBETRAIN_TOOLS_NODE_AGENT_POD_FIT_H_
#define KUBETRAIN_TOOLS_NODE_AGENT_POD_FIT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kubetrain::node_agent {

struct Resources {
  int64_t cpu_millis = 0;
  int64_t memory_bytes = 0;
  int64_t pods = 0;
};

// The pod's requests: the sum over containers (a container with a limit but
// no request requests its limit, as the API server defaults it), at least
// the largest init container's, plus one pod. A malformed quantity is an
// error naming the container.
absl::StatusOr<Resources> PodRequests(const nlohmann::json& pod);

// Succeeded or Failed: the pod no longer holds resources.
bool IsTerminal(const nlohmann::json& pod);

// "" when `request` fits in `capacity` next to `used`; else why not, as the
// scheduler says it ("Insufficient cpu", "Insufficient memory", "Too many
// pods").
std::string FitFailure(const Resources& capacity, const Resources& used, const Resources& request);

// "" when `pod` may go to `node` by its labels and spec: the pod's
// nodeSelector matches the node's labels, the node is not cordoned
// (spec.unschedulable), and the pod tolerates each of its NoSchedule and
// NoExecute taints; else why not, as the scheduler says it ("node(s) didn't
// match Pod's node affinity/selector", "node(s) were unschedulable",
// "node(s) had untolerated taint {e2e: lost}").
std::string PlacementFailure(const nlohmann::json& pod, const nlohmann::json& node);

// The sum of the requests of `pods` bound to `node_name` that are not
// terminal. Pods with malformed requests count as requesting nothing.
Resources UsedOnNode(const std::vector<nlohmann::json>& pods, const std::string& node_name);

}  // namespace kubetrain::node_agent

#endif  // KUBETRAIN_TOOLS_NODE_AGENT_POD_FIT_H_
