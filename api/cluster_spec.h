// The cluster a TrainingJob forms: replica names, addresses, Kubeflow TFJob's
// TF_CONFIG, and the whole environment a replica gets (ARCHITECTURE.md,
// "Contracts between operator and runtime"). Used by the operator for pods
// and by `kubetrain run` for local processes; the runtime parses TF_CONFIG.
//
// TF_CONFIG matches kubeflow/training-operator's genTFConfigJSONStr and
// genClusterSpec (pkg/controller.v1/tensorflow/tensorflow.go) byte for byte:
// Go marshals the TFConfig struct in field order (cluster, task, environment),
// TaskSpec as {"type","index"}, and the cluster map with sorted keys; every
// replica type in the spec is a cluster key under its lower-case name
// ("chief", "evaluator", "ps", "worker"), evaluator included; "environment"
// is always "cloud". Example (job fmnist, 1 PS + 2 workers, worker 1):
//   {"cluster":{"ps":["fmnist-ps-0.default.svc:2222"],"worker":["fmnist-worker-0.default.svc:2222",
//   "fmnist-worker-1.default.svc:2222"]},"task":{"type":"worker","index":1},"environment":"cloud"}
// (one line). Unlike TFJob, TF_CONFIG is also set for single-replica jobs:
// the runtime always learns its role from it.
//
// Value types; functions are stateless and thread-safe.
#ifndef KUBETRAIN_API_CLUSTER_SPEC_H_
#define KUBETRAIN_API_CLUSTER_SPEC_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "api/labels.h"
#include "api/training_job.h"

namespace kubetrain::api {

// Lower-case replica type -> "host:port" of each index, in index order.
struct ClusterSpec {
  std::map<std::string, std::vector<std::string>> hosts;
  bool operator==(const ClusterSpec&) const = default;
};

// A parsed TF_CONFIG.
struct TfConfig {
  ClusterSpec cluster;
  std::string task_type;  // lower-case: "worker", "ps", "chief", "evaluator"
  int task_index = 0;
  std::string environment;  // "cloud" from kubetrain and Kubeflow; may be empty
};

// `<job>-<type>-<index>`, type lower-case: pod name = headless Service name.
std::string ReplicaName(const TrainingJob& job, ReplicaType type, int index);

// True for the replica that initialises and decides success: the Chief, or
// Worker 0 when the job has no Chief replicas.
bool IsChiefRole(const TrainingJob& job, ReplicaType type, int index);

// The rank rule of jobs without parameter servers: the Chief is rank 0, then
// the Workers in index order (Worker i is rank i + number of Chiefs). PS and
// Evaluator replicas have no rank: they are not in the world. The operator
// sets it as RANK; the runtime derives the same from TF_CONFIG.
std::optional<int> WorldRank(std::string_view lower_type, int index, int chiefs);

// Labels every pod and Service of the replica carries.
std::map<std::string, std::string> ReplicaLabels(const TrainingJob& job, ReplicaType type,
                                                 int index);

// One entry per replica type in the spec (all indices, replicas <= 0 give an
// empty list), addresses from `address`.
using AddressFn = std::function<std::string(ReplicaType type, int index)>;
ClusterSpec ClusterFor(const TrainingJob& job, const AddressFn& address);

// In-cluster DNS addresses `<job>-<type>-<index>.<ns>.svc[.<domain>]:<port>`
// (serviceMode PerJob: `<job>-<type>-<index>.<job>.<ns>.svc[.<domain>]:<port>`),
// port from the replica's kubetrain-port (default 2222). `cluster_domain`
// mirrors TFJob's CUSTOM_CLUSTER_DOMAIN (empty: none).
ClusterSpec InClusterSpec(const TrainingJob& job, const std::string& cluster_domain = "");

// TF_CONFIG JSON for the replica (see the top comment for the exact form).
std::string TfConfigJson(const ClusterSpec& cluster, ReplicaType type, int index);
std::string TfConfigJson(const ClusterSpec& cluster, const std::string& task_type, int index);

// Parses TF_CONFIG. InvalidArgument "TF_CONFIG: <path>: <problem>" when it
// is not JSON, lacks cluster/task, has non-string addresses, or the task is
// not in the cluster (evaluators may be left out of it, as TensorFlow allows).
absl::StatusOr<TfConfig> ParseTfConfig(const std::string& json);

using EnvList = std::vector<std::pair<std::string, std::string>>;

// The environment kubetrain gives the replica, in this order:
//   TF_CONFIG;
//   KUBETRAIN_PS_HOSTS, KUBETRAIN_WORKER_HOSTS, KUBETRAIN_CHIEF_HOSTS
//     (comma lists, each only when the type is in the spec);
//   KUBETRAIN_JOB_NAME, KUBETRAIN_NAMESPACE, KUBETRAIN_REPLICA_TYPE
//     (lower-case), KUBETRAIN_REPLICA_INDEX;
//   for jobs without PS: MASTER_ADDR, MASTER_PORT (of the Chief, else
//     Worker 0), WORLD_SIZE (chief + workers), RANK (WorldRank);
//   on Worker replicas of an elastic job (spec.elasticPolicy):
//     KUBETRAIN_MIN_WORKERS, KUBETRAIN_MAX_WORKERS;
//   KUBETRAIN_JOB_TOKEN when `job_token` is not empty.
// The operator puts these before the container's own env so that the
// container's values may refer to them with $(VAR).
EnvList ReplicaEnvironment(const TrainingJob& job, const ClusterSpec& cluster, ReplicaType type,
                           int index, const std::string& job_token);

// The kubelet's $(VAR) expansion (k8s.io/kubernetes third_party/forked/golang/
// expansion): $(NAME) becomes the value of NAME, or stays "$(NAME)" when
// NAME is not defined; "$$" becomes "$" (so "$$(VAR)" is a literal
// "$(VAR)"); any other "$" and an unterminated "$(" are kept as written.
// In `env`, the last definition of a name wins.
std::string ExpandVars(const std::string& s, const EnvList& env);
std::string ExpandVars(const std::string& s,
                       const std::function<std::optional<std::string>(const std::string&)>& lookup);

}  // namespace kubetrain::api

#endif  // KUBETRAIN_API_CLUSTER_SPEC_H_
