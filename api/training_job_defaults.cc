// TrainingJob defaults (as Kubeflow's tensorflow_defaults.go): the default
// namespace, replicas 1, the default restart policy, the kubetrain-port on
// the first container, cleanPodPolicy Running.
#include "api/training_job.h"

namespace kubetrain::api {

using nlohmann::json;

void ApplyDefaults(TrainingJob& job) {
  if (job.metadata.namespace_name.empty()) job.metadata.namespace_name = kDefaultNamespace;
  for (auto& [type, rs] : job.spec.replica_specs) {
    if (!rs.replicas) rs.replicas = 1;
    if (!rs.restart_policy) rs.restart_policy = kDefaultRestartPolicy;
    // Give the first container the kubetrain-port, as TFJob does for
    // tfjob-port, so Services and TF_CONFIG agree on it.
    json& t = rs.pod_template;
    if (!t.is_object() || !t.contains("spec") || !t["spec"].is_object()) continue;
    json& cs = t["spec"]["containers"];
    if (!cs.is_array() || cs.empty() || !cs[0].is_object()) {
      if (cs.is_null()) t["spec"].erase("containers");
      continue;
    }
    json& c = cs[0];
    if (c.contains("ports") && !c["ports"].is_array() && !c["ports"].is_null()) continue;
    bool has_port = false;
    if (c.contains("ports") && c["ports"].is_array()) {
      for (const json& p : c["ports"]) {
        if (!p.is_object()) continue;
        auto n = p.find("name");
        if (n != p.end() && n->is_string() && n->get<std::string>() == kPortName) has_port = true;
      }
    }
    if (!has_port) {
      c["ports"].push_back(json{{"name", kPortName}, {"containerPort", kDefaultPort}});
    }
  }
  if (!job.spec.run_policy.clean_pod_policy) {
    job.spec.run_policy.clean_pod_policy = CleanPodPolicy::kRunning;
  }
}

}  // namespace kubetrain::api
