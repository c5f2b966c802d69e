// Which replica of a TrainingJob a pod runs, as the plugin names it:
// "worker-3" (replica type lower-case, a dash, the index), read from the
// labels of api/labels.h. Also the view of a pod's replica container that
// the log and top commands decide on. Value types and free functions;
// thread-safe.
#ifndef KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_REPLICA_REF_H_
#define KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_REPLICA_REF_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kubetrain::kubectl_plugin {

struct ReplicaRef {
  std::string type;  // lower-case: "chief", "ps", "worker", "evaluator"
  int index = 0;

  bool operator==(const ReplicaRef& other) const = default;
  // Chief, PS, Worker, Evaluator; then by index.
  bool operator<(const ReplicaRef& other) const;
};

// "worker-3".
std::string ReplicaName(const ReplicaRef& replica);
// "worker-3", "Worker-3" -> {worker, 3}; InvalidArgument naming the text
// otherwise (an unknown type, no index, a negative index).
absl::StatusOr<ReplicaRef> ParseReplicaName(absl::string_view text);
// From the pod's kubetrain.io/replica-type and /replica-index labels;
// nullopt when either is missing or malformed.
std::optional<ReplicaRef> ReplicaOfPod(const nlohmann::json& pod);

// The label selector of a job's pods: "kubetrain.io/job-name=<job>".
std::string JobPodSelector(absl::string_view job);

// What the plugin reads from one pod about its replica container.
struct PodView {
  ReplicaRef replica;
  std::string pod;             // metadata.name
  std::string uid;             // metadata.uid
  std::string phase;           // status.phase
  std::string container;       // the container the plugin reads
  int restarts = 0;            // that container's restartCount
  bool running = false;        // its current instance runs (state.running)
  bool terminated = false;     // its current instance ended (state.terminated)
  std::string waiting_reason;  // state.waiting.reason, "" when not waiting
  bool being_deleted = false;  // metadata.deletionTimestamp set
};

// The view of `pod`; `container` "" means the pod's first container (the
// replica's, as the operator builds it). nullopt when the pod carries no
// replica labels or has no such container.
std::optional<PodView> ViewOfPod(const nlohmann::json& pod, absl::string_view container);

}  // namespace kubetrain::kubectl_plugin

#endif  // KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_REPLICA_REF_H_
