// TrainingJob (kubetrain.io/v1alpha1): the C++ form of the resource, parsed
// from YAML/JSON, defaulted, validated, and written back to JSON. Shared by
// the operator and the local launcher (`kubetrain run`).
//
// Field names and defaults follow Kubeflow's TFJob where TFJob has them:
//   - restartPolicy defaults to Never (TFJobDefaultRestartPolicy in
//     kubeflow/training-operator pkg/apis/kubeflow.org/v1/tensorflow_types.go);
//   - replicas defaults to 1; replica-type keys are matched case-insensitively
//     and normalised to PS, Worker, Chief, Evaluator;
//   - the container port named `kubetrain-port` defaults to 2222 and is added
//     to the first container by ApplyDefaults, as TFJob does for tfjob-port.
// cleanPodPolicy defaults to Running (ARCHITECTURE.md; TFJob v1 uses None).
//
// The pod template is kept as JSON so the operator can copy it to pods
// unchanged; FirstContainer() gives typed access to the container that runs
// the replica (the first one).
//
// Value types; functions are stateless and thread-safe. No exceptions escape.
#ifndef KUBETRAIN_API_TRAINING_JOB_H_
#define KUBETRAIN_API_TRAINING_JOB_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/job_status.h"
#include "api/replica_type.h"

namespace kubetrain::api {

inline constexpr char kApiVersion[] = "kubetrain.io/v1alpha1";
inline constexpr char kKind[] = "TrainingJob";
inline constexpr char kDefaultNamespace[] = "default";
inline constexpr char kPortName[] = "kubetrain-port";
inline constexpr int kDefaultPort = 2222;

enum class RestartPolicy { kAlways, kOnFailure, kNever, kExitCode };
std::string RestartPolicyName(RestartPolicy policy);
std::optional<RestartPolicy> ParseRestartPolicy(std::string_view name);
inline constexpr RestartPolicy kDefaultRestartPolicy = RestartPolicy::kNever;

enum class CleanPodPolicy { kRunning, kAll, kNone };
std::string CleanPodPolicyName(CleanPodPolicy policy);
std::optional<CleanPodPolicy> ParseCleanPodPolicy(std::string_view name);

// What follows a Stalled job (runPolicy.stallPolicy): nothing but the
// condition, deleting the stalled replicas' pods (they are recreated and
// resume from the checkpoint), or failing the job.
enum class StallPolicy { kNone, kRestart, kFail };
std::string StallPolicyName(StallPolicy policy);
std::optional<StallPolicy> ParseStallPolicy(std::string_view name);

// What follows a replica left unscheduled past schedulingTimeoutSeconds:
// the Unschedulable condition, and the job keeps waiting or fails.
enum class UnschedulablePolicy { kWait, kFail };
std::string UnschedulablePolicyName(UnschedulablePolicy policy);
std::optional<UnschedulablePolicy> ParseUnschedulablePolicy(std::string_view name);
// runPolicy.stallTimeoutSeconds when unset: five minutes without progress.
inline constexpr int64_t kDefaultStallTimeoutSeconds = 300;
// runPolicy.nodeLostTimeoutSeconds when unset.
inline constexpr int64_t kDefaultNodeLostTimeoutSeconds = 60;

enum class SuccessPolicy { kDefault, kAllWorkers };  // "" and "AllWorkers"
std::string SuccessPolicyName(SuccessPolicy policy);
std::optional<SuccessPolicy> ParseSuccessPolicy(std::string_view name);

// spec.serviceMode: how replicas find each other.
//   PerReplica (default, TFJob's): a headless Service per replica, named as
//     its pod; addresses <job>-<type>-<i>.<ns>.svc:<port>.
//   PerJob (as JobSet and the MPI operator): one headless Service named as
//     the job; each pod has hostname <job>-<type>-<i> and subdomain <job>;
//     addresses <job>-<type>-<i>.<job>.<ns>.svc:<port>. One Service per job
//     instead of one per replica: fewer API calls and objects.
enum class ServiceMode { kPerReplica, kPerJob };
std::string ServiceModeName(ServiceMode mode);
std::optional<ServiceMode> ParseServiceMode(std::string_view name);

struct ObjectMeta {
  std::string name;
  std::string namespace_name;  // "" until ApplyDefaults sets "default"
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::string uid;
  std::string resource_version;
  int64_t generation = 0;
  bool operator==(const ObjectMeta&) const = default;
};

// Typed view of a container in the pod template. Resources and other
// Kubernetes fields are left in the template.
struct EnvVar {
  std::string name;
  std::string value;
  bool value_from = false;  // set through valueFrom (Secret, field ref...)
  bool operator==(const EnvVar&) const = default;
};

struct ContainerPort {
  std::string name;
  int32_t container_port = 0;
  std::string protocol;
  bool operator==(const ContainerPort&) const = default;
};

struct Container {
  std::string name;
  std::string image;
  std::vector<std::string> command;
  std::vector<std::string> args;
  std::vector<EnvVar> env;
  std::vector<ContainerPort> ports;
  bool operator==(const Container&) const = default;
};

struct ReplicaSpec {
  std::optional<int32_t> replicas;                         // default 1
  std::optional<RestartPolicy> restart_policy;             // default Never
  nlohmann::json pod_template = nlohmann::json::object();  // `template`

  int32_t Replicas() const { return replicas.value_or(1); }
  RestartPolicy Restart() const { return restart_policy.value_or(kDefaultRestartPolicy); }
  // The first container of template.spec.containers; InvalidArgument naming
  // the path (relative to the replica spec) when missing or malformed.
  absl::StatusOr<Container> FirstContainer() const;
  // containerPort of the first container's port named kubetrain-port, else
  // 2222.
  int32_t Port() const;
  bool operator==(const ReplicaSpec&) const = default;
};

struct SchedulingPolicy {
  std::optional<int32_t> min_available;
  std::string queue;
  std::string priority_class;
  bool operator==(const SchedulingPolicy&) const = default;
};

inline constexpr int32_t kDefaultMaxDisruptions = 10;

struct RunPolicy {
  std::optional<CleanPodPolicy> clean_pod_policy;  // default Running
  std::optional<int32_t> backoff_limit;            // restarts allowed, all replicas together
  // Evicted, preempted or node-lost replicas recreated without counting
  // toward backoff_limit (api/failure_reason.h); default kDefaultMaxDisruptions.
  std::optional<int32_t> max_disruptions;
  // Seconds without a replica's step advancing before the job is Stalled
  // (default kDefaultStallTimeoutSeconds; 0: never), and what follows.
  std::optional<int64_t> stall_timeout_seconds;
  std::optional<StallPolicy> stall_policy;  // default None
  // Seconds a replica's pod may stay unscheduled before the job is
  // Unschedulable (absent: never), and what follows.
  std::optional<int64_t> scheduling_timeout_seconds;
  std::optional<UnschedulablePolicy> unschedulable_policy;  // default Wait
  // Seconds a replica's node may stay not Ready (or a pod Terminating past
  // its grace period) before the pod is force-deleted and recreated
  // (default kDefaultNodeLostTimeoutSeconds; 0: never).
  std::optional<int64_t> node_lost_timeout_seconds;
  std::optional<int64_t> active_deadline_seconds;
  std::optional<int32_t> ttl_seconds_after_finished;
  bool suspend = false;
  std::optional<SchedulingPolicy> scheduling_policy;
  bool operator==(const RunPolicy&) const = default;
};

// spec.elasticPolicy (as Kubeflow PyTorchJob's): the Worker replicas may
// change while the job runs (`kubectl scale`, an HPA through the scale
// subresource) between min_replicas and max_replicas; the runtime's world
// shrinks and grows with them. Absent: the job is not elastic.
struct ElasticPolicy {
  int32_t min_replicas = 1;
  int32_t max_replicas = 1;
  bool operator==(const ElasticPolicy&) const = default;
};

struct TrainingJobSpec {
  std::map<ReplicaType, ReplicaSpec> replica_specs;
  RunPolicy run_policy;
  std::optional<ElasticPolicy> elastic_policy;
  SuccessPolicy success_policy = SuccessPolicy::kDefault;
  ServiceMode service_mode = ServiceMode::kPerReplica;
  bool operator==(const TrainingJobSpec&) const = default;
};

struct TrainingJob {
  std::string api_version = kApiVersion;
  std::string kind = kKind;
  ObjectMeta metadata;
  TrainingJobSpec spec;
  std::optional<JobStatus> status;  // unset when the object has none

  // The spec for `type`, or nullptr when the job has none.
  const ReplicaSpec* Find(ReplicaType type) const;
  // Replicas of `type` (0 when the type is absent).
  int32_t ReplicaCount(ReplicaType type) const;
  // Whether spec.elasticPolicy is set.
  bool Elastic() const { return spec.elastic_policy.has_value(); }
  bool operator==(const TrainingJob&) const = default;
};

// Parses YAML or JSON text (one document). Structural problems (wrong types,
// unknown fields in spec, unknown replica types, bad enum values) are
// InvalidArgument errors naming the field path; malformed text gives the
// line and column. Does not apply defaults or validate: see LoadTrainingJob.
absl::StatusOr<TrainingJob> ParseTrainingJob(const std::string& text,
                                             const std::string& source_name);
absl::StatusOr<TrainingJob> FromJson(const nlohmann::json& json);
nlohmann::json ToJson(const TrainingJob& job);

// Sets unset fields to their defaults (see the top comment). Idempotent.
void ApplyDefaults(TrainingJob& job);

// Semantic checks; InvalidArgument "<field path>: <problem>", e.g.
// "spec.replicaSpecs.Worker.replicas: must be >= 0, got -1". An elastic
// job's Worker replicas must lie within [minReplicas, maxReplicas]: the check
// of a job as created. A running job scaled outside that range is refused by
// the operator's admission webhook (operator/webhook/); one that got past it
// (no webhook installed, or the operator down with failurePolicy Ignore) is
// clamped by ClampElasticWorkers instead, before Validate.
absl::Status Validate(const TrainingJob& job);

// For an elastic job whose spec.replicaSpecs.Worker.replicas lies outside
// [minReplicas, maxReplicas]: sets it to the nearest bound and returns what
// was asked and what is allowed; nullopt (and nothing changes) otherwise.
struct ElasticClamp {
  int32_t asked = 0;
  int32_t allowed = 0;
  bool operator==(const ElasticClamp&) const = default;
};
std::optional<ElasticClamp> ClampElasticWorkers(TrainingJob& job);
// "6 is above spec.elasticPolicy.maxReplicas 4" (or "below ... minReplicas"):
// the webhook's refusal and the operator's ScaleRefused say it alike.
std::string ElasticBoundMessage(const ElasticClamp& clamp);

// Parse + ApplyDefaults + Validate; errors are prefixed with source_name.
absl::StatusOr<TrainingJob> LoadTrainingJob(const std::string& text,
                                            const std::string& source_name);

}  // namespace kubetrain::api

#endif  // KUBETRAIN_API_TRAINING_JOB_H_
