// Replicas left unscheduled: whether any pod of a job has waited for a node
// longer than runPolicy.schedulingTimeoutSeconds, named with the
// scheduler's own message (the PodScheduled=False condition: "0/3 nodes
// are available: 3 Insufficient nvidia.com/gpu."), so that one pod of a
// hundred left Pending does not leave the job waiting in silence
// (kubeflow/trainer#1282). With gang scheduling the whole gang waits: the
// message says so and names every pod still unscheduled. Pure: the
// reconciler turns the verdict into the Unschedulable condition.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_SCHEDULING_CHECK_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_SCHEDULING_CHECK_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace kubetrain::controller {

struct ReplicaPod {
  std::string replica;  // "worker-3"
  const nlohmann::json* pod;
};

struct Gang {
  std::string pod_group;  // the PodGroup's name
  int64_t min_member = 0;
};

struct SchedulingCheck {
  // Set when some pod waited past the timeout: the condition's message
  // (no running times in it, so it is not rewritten on every pass) and the
  // pods it names.
  std::optional<std::string> message;
  std::vector<std::string> pods;
  // When the next unscheduled pod reaches the timeout (for a requeue).
  std::optional<absl::Duration> wait;
};

// A pod is unscheduled while it has no node (spec.nodeName empty), is not
// being deleted and has not finished; it has waited since its
// creationTimestamp. `timeout_seconds` > 0.
SchedulingCheck CheckScheduling(const std::vector<ReplicaPod>& replicas, int64_t timeout_seconds,
                                absl::Time now, const std::optional<Gang>& gang);

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_SCHEDULING_CHECK_H_
