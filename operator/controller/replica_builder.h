// The objects the operator creates for a TrainingJob, built from its spec
// (ARCHITECTURE.md "Contracts between operator and runtime"):
//   - a Pod and a headless Service per replica, named <job>-<type>-<index>
//     (serviceMode PerJob: one headless Service named <job>, and each pod
//     gets hostname <job>-<type>-<index> and subdomain <job>),
//     with the replica labels, a controller ownerReference to the job, the
//     kubetrain-port, the named metrics port (api/ports.h: a PodMonitor
//     selects it by name, so sidecars' ports are never scraped),
//     Prometheus scrape annotations and the replica
//     environment (TF_CONFIG byte-compatible with TFJob, host lists, rank
//     variables, api::kEnvJobToken from the job's Secret) placed before
//     the container's own env so $(VAR) references resolve;
//   - the job-token Secret <job>-token (created, never read, when pods are
//     about to be created: the operator has no permission to read Secrets);
//   - a Volcano PodGroup when gang scheduling is on.
// Stateless and thread-safe.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_REPLICA_BUILDER_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_REPLICA_BUILDER_H_

#include <nlohmann/json.hpp>
#include <string>

#include "api/env_vars.h"
#include "api/ports.h"
#include "api/training_job.h"

namespace kubetrain::controller {

using Json = nlohmann::json;

inline constexpr char kTokenSecretKey[] = "token";
inline constexpr char kVolcanoGroupAnnotation[] = "scheduling.k8s.io/group-name";

struct BuildOptions {
  std::string gang_scheduler;  // "" or "volcano"
};

// "<job>-token-<first 8 characters of the job's UID>".
std::string TokenSecretName(const api::TrainingJob& job);

// `job_json` is the TrainingJob as read from the API (for the owner
// reference: apiVersion, kind, name, uid); `job` its parsed, defaulted form.
Json BuildPod(const api::TrainingJob& job, const Json& job_json, api::ReplicaType type, int index,
              const BuildOptions& options);
Json BuildService(const api::TrainingJob& job, const Json& job_json, api::ReplicaType type,
                  int index);
// serviceMode PerJob: the job's one headless Service, named as the job,
// selecting all its pods (job-name label), with every replica port.
Json BuildJobService(const api::TrainingJob& job, const Json& job_json);
// `token`: random, made by the caller.
Json BuildTokenSecret(const api::TrainingJob& job, const Json& job_json, const std::string& token);
Json BuildPodGroup(const api::TrainingJob& job, const Json& job_json);

// The pod-level restartPolicy for a replica policy: ExitCode is handled by
// the operator, so its pods never restart in place.
std::string PodRestartPolicy(api::RestartPolicy policy);

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_REPLICA_BUILDER_H_
