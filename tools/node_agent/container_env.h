// What the kubelet computes before it starts a container, pure over Pod
// JSON: the environment (value, valueFrom secretKeyRef / configMapKeyRef /
// fieldRef, with $(VAR) expansion from the entries before it) and the argv
// (command + args, $(VAR)-expanded; a container without a command runs the
// image's entrypoint, here one local binary). Free functions; thread-safe.
#ifndef KUBETRAIN_TOOLS_NODE_AGENT_CONTAINER_ENV_H_
#define KUBETRAIN_TOOLS_NODE_AGENT_CONTAINER_ENV_H_

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/cluster_spec.h"

namespace kubetrain::node_agent {

// Reads key `key` of the Secret or ConfigMap (`kind`) `ns`/`name`, decoded.
// NotFound when the object or the key is missing.
using KeyLookup =
    std::function<absl::StatusOr<std::string>(const std::string& kind, const std::string& ns,
                                              const std::string& name, const std::string& key)>;

// What the pod's fieldRefs read that is not in the pod object yet.
struct PodRuntimeFields {
  std::string pod_ip;
  std::string host_ip;
  std::string node_name;
};

// The container's environment in order. A missing Secret/ConfigMap key is
// an error unless the reference is `optional: true` (then the variable is
// left out); an unsupported source (resourceFieldRef, envFrom) is an error
// naming it, never silently dropped.
absl::StatusOr<api::EnvList> ContainerEnvironment(const nlohmann::json& pod,
                                                  const nlohmann::json& container,
                                                  const PodRuntimeFields& fields,
                                                  const KeyLookup& lookup);

// command + args with $(VAR) expanded from `env`; with no command,
// `entrypoint` + args. Empty result is an error.
absl::StatusOr<std::vector<std::string>> ContainerArgv(const nlohmann::json& container,
                                                       const api::EnvList& env,
                                                       const std::string& entrypoint);

}  // namespace kubetrain::node_agent

#endif  // KUBETRAIN_TOOLS_NODE_AGENT_CONTAINER_ENV_H_
