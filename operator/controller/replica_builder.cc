#include "operator/controller/replica_builder.h"

#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "api/cluster_spec.h"
#include "operator/kube/object.h"

namespace kubetrain::controller {
namespace {

Json OwnedMetadata(const api::TrainingJob& job, const Json& job_json, const std::string& name,
                   const std::map<std::string, std::string>& labels) {
  Json meta{{"name", name}, {"namespace", job.metadata.namespace_name}};
  meta["labels"] = labels;
  meta["ownerReferences"] = Json::array({kube::ControllerReference(job_json)});
  return meta;
}

}  // namespace

std::string TokenSecretName(const api::TrainingJob& job) {
  // The UID makes the name belong to this incarnation of the job: a job
  // deleted and created again under the same name must not find (and, never
  // reading Secrets, silently keep) its predecessor's Secret, which garbage
  // collection is about to remove.
  if (job.metadata.uid.empty()) return absl::StrCat(job.metadata.name, "-token");
  return absl::StrCat(job.metadata.name, "-token-", job.metadata.uid.substr(0, 8));
}

std::string PodRestartPolicy(api::RestartPolicy policy) {
  switch (policy) {
    case api::RestartPolicy::kAlways:
      return "Always";
    case api::RestartPolicy::kOnFailure:
      return "OnFailure";
    case api::RestartPolicy::kNever:
    case api::RestartPolicy::kExitCode:
      return "Never";
  }
  return "Never";
}

Json BuildPod(const api::TrainingJob& job, const Json& job_json, api::ReplicaType type, int index,
              const BuildOptions& options) {
  const api::ReplicaSpec& spec = *job.Find(type);
  Json pod_template = spec.pod_template.is_object() ? spec.pod_template : Json::object();
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  if (pod_template.contains("metadata") && pod_template["metadata"].is_object()) {
    const Json& meta = pod_template["metadata"];
    if (meta.contains("labels") && meta["labels"].is_object()) {
      for (const auto& [k, v] : meta["labels"].items()) {
        if (v.is_string()) labels[k] = v.get<std::string>();
      }
    }
    if (meta.contains("annotations") && meta["annotations"].is_object()) {
      for (const auto& [k, v] : meta["annotations"].items()) {
        if (v.is_string()) annotations[k] = v.get<std::string>();
      }
    }
  }
  for (const auto& [k, v] : api::ReplicaLabels(job, type, index)) labels[k] = v;
  annotations.emplace(api::kPrometheusScrapeAnnotation, "true");
  annotations.emplace(api::kPrometheusPortAnnotation, api::kMetricsPortString);
  annotations.emplace(api::kPrometheusPathAnnotation, api::kMetricsPath);

  const std::string name = api::ReplicaName(job, type, index);
  Json pod{{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = OwnedMetadata(job, job_json, name, labels);
  Json pod_spec = pod_template.contains("spec") && pod_template["spec"].is_object()
                      ? pod_template["spec"]
                      : Json::object();
  pod_spec["restartPolicy"] = PodRestartPolicy(spec.Restart());
  if (job.spec.service_mode == api::ServiceMode::kPerJob) {
    // <name>.<job>.<ns>.svc resolves through the job's headless Service.
    pod_spec["hostname"] = name;
    pod_spec["subdomain"] = job.metadata.name;
  }

  // The replica environment goes first in the first container (the one that
  // runs the replica), so the container's own values may use $(VAR).
  api::ClusterSpec cluster = api::InClusterSpec(job);
  api::EnvList env = api::ReplicaEnvironment(job, cluster, type, index, /*job_token=*/"");
  Json env_json = Json::array();
  for (const auto& [k, v] : env) env_json.push_back({{"name", k}, {"value", v}});
  env_json.push_back(
      {{"name", api::kEnvJobToken},
       {"valueFrom",
        {{"secretKeyRef", {{"name", TokenSecretName(job)}, {"key", kTokenSecretKey}}}}}});
  if (pod_spec.contains("containers") && pod_spec["containers"].is_array() &&
      !pod_spec["containers"].empty()) {
    Json& container = pod_spec["containers"][0];
    if (container.contains("env") && container["env"].is_array()) {
      for (const Json& e : container["env"]) env_json.push_back(e);
    }
    container["env"] = env_json;
    // A crash that writes no termination message of its own still leaves
    // its last log lines in the pod's status (status.lastFailure.message).
    if (!container.contains("terminationMessagePolicy")) {
      container["terminationMessagePolicy"] = "FallbackToLogsOnError";
    }
    // The metrics port, by name, unless the template declares it (by name or
    // number) already: a second entry for the same port would be a duplicate.
    if (!container.contains("ports") || !container["ports"].is_array()) {
      container["ports"] = Json::array();
    }
    bool declared = false;
    for (const Json& p : container["ports"]) {
      if (kube::StringAt(p, {"name"}) == api::kMetricsPortName ||
          kube::IntAt(p, {"containerPort"}, 0) == api::kMetricsPort) {
        declared = true;
      }
    }
    if (!declared) {
      container["ports"].push_back({{"name", api::kMetricsPortName},
                                    {"containerPort", api::kMetricsPort},
                                    {"protocol", "TCP"}});
    }
  }
  if (options.gang_scheduler == "volcano" && job.spec.run_policy.scheduling_policy) {
    pod_spec["schedulerName"] = "volcano";
    annotations[kVolcanoGroupAnnotation] = job.metadata.name;
    annotations["volcano.sh/task-spec"] = api::ReplicaTypeLower(type);
  }
  pod["metadata"]["annotations"] = annotations;
  pod["spec"] = pod_spec;
  return pod;
}

Json BuildService(const api::TrainingJob& job, const Json& job_json, api::ReplicaType type,
                  int index) {
  const api::ReplicaSpec& spec = *job.Find(type);
  std::map<std::string, std::string> labels = api::ReplicaLabels(job, type, index);
  std::map<std::string, std::string> selector = {
      {api::kLabelJobName, job.metadata.name},
      {api::kLabelReplicaType, api::ReplicaTypeLower(type)},
      {api::kLabelReplicaIndex, absl::StrCat(index)}};
  Json service{{"apiVersion", "v1"}, {"kind", "Service"}};
  service["metadata"] = OwnedMetadata(job, job_json, api::ReplicaName(job, type, index), labels);
  service["spec"] = {{"clusterIP", "None"},
                     {"selector", selector},
                     {"publishNotReadyAddresses", true},
                     {"ports", Json::array({{{"name", api::kPortName},
                                             {"port", spec.Port()},
                                             {"targetPort", spec.Port()},
                                             {"protocol", "TCP"}}})}};
  return service;
}

Json BuildJobService(const api::TrainingJob& job, const Json& job_json) {
  std::set<int> ports;
  for (const auto& [type, spec] : job.spec.replica_specs) ports.insert(spec.Port());
  Json port_list = Json::array();
  for (int port : ports) {
    Json p{{"port", port}, {"targetPort", port}, {"protocol", "TCP"}};
    // Port names must be unique: the first is kubetrain-port, others by number.
    p["name"] = port_list.empty() ? std::string(api::kPortName) : absl::StrCat("port-", port);
    port_list.push_back(std::move(p));
  }
  Json service{{"apiVersion", "v1"}, {"kind", "Service"}};
  service["metadata"] =
      OwnedMetadata(job, job_json, job.metadata.name, {{api::kLabelJobName, job.metadata.name}});
  service["spec"] = {{"clusterIP", "None"},
                     {"selector", {{api::kLabelJobName, job.metadata.name}}},
                     {"publishNotReadyAddresses", true},
                     {"ports", port_list}};
  return service;
}

Json BuildTokenSecret(const api::TrainingJob& job, const Json& job_json, const std::string& token) {
  Json secret{{"apiVersion", "v1"}, {"kind", "Secret"}, {"type", "Opaque"}};
  secret["metadata"] =
      OwnedMetadata(job, job_json, TokenSecretName(job), {{api::kLabelJobName, job.metadata.name}});
  secret["data"] = {{kTokenSecretKey, absl::Base64Escape(token)}};
  return secret;
}

Json BuildPodGroup(const api::TrainingJob& job, const Json& job_json) {
  int total = 0;
  for (const auto& [type, spec] : job.spec.replica_specs) total += spec.Replicas();
  const api::SchedulingPolicy& policy = *job.spec.run_policy.scheduling_policy;
  Json group{{"apiVersion", "scheduling.volcano.sh/v1beta1"}, {"kind", "PodGroup"}};
  group["metadata"] =
      OwnedMetadata(job, job_json, job.metadata.name, {{api::kLabelJobName, job.metadata.name}});
  Json spec{{"minMember", policy.min_available.value_or(total)}};
  if (!policy.queue.empty()) spec["queue"] = policy.queue;
  if (!policy.priority_class.empty()) spec["priorityClassName"] = policy.priority_class;
  group["spec"] = spec;
  return group;
}

}  // namespace kubetrain::controller
