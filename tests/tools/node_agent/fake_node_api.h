// FakeApi: the node agent's view of the Kubernetes API in memory (pods,
// services, Secret keys, Nodes and their Leases), every write recorded.
#ifndef KUBETRAIN_TESTS_TOOLS_NODE_AGENT_FAKE_NODE_API_H_
#define KUBETRAIN_TESTS_TOOLS_NODE_AGENT_FAKE_NODE_API_H_

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "operator/kube/object.h"
#include "tools/node_agent/node_api.h"

namespace kubetrain::node_agent {

class FakeApi final : public NodeApi {
 public:
  // As the API: the Node is created, or its status replaced (its spec, the
  // taints, stays).
  absl::Status RegisterNode(const nlohmann::json& n) override {
    const nlohmann::json spec = node.is_object() && node.contains("spec") ? node["spec"] : nullptr;
    node = n;
    if (!spec.is_null()) node["spec"] = spec;
    return absl::OkStatus();
  }
  absl::Status RenewLease(const nlohmann::json& lease) override {
    leases.push_back(lease);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<nlohmann::json>> ListNodes(
      const std::string& label_selector) override {
    std::vector<nlohmann::json> out;
    for (const auto& [name, n] : nodes) {
      if (label_selector.empty() || kube::Label(n, label_selector) != "") out.push_back(n);
    }
    return out;
  }
  absl::Status PatchNodeSpec(const std::string& name, const nlohmann::json& spec) override {
    nlohmann::json& target = name == kube::Name(node) ? node : nodes[name];
    for (const auto& [k, v] : spec.items()) {
      if (v.is_null()) {
        if (target.contains("spec")) target["spec"].erase(k);
      } else {
        target["spec"][k] = v;
      }
    }
    node_spec_patches.push_back(name);
    return absl::OkStatus();
  }
  absl::StatusOr<nlohmann::json> GetNode(const std::string& name) override {
    if (name == kube::Name(node)) return node;
    auto it = nodes.find(name);
    if (it == nodes.end()) return absl::NotFoundError(name);
    return it->second;
  }
  absl::StatusOr<std::vector<nlohmann::json>> ListNodeLeases() override {
    std::vector<nlohmann::json> out;
    for (const auto& [name, l] : node_leases) out.push_back(l);
    return out;
  }
  absl::Status PatchNodeStatus(const std::string& name, const nlohmann::json& status) override {
    if (!nodes.count(name)) return absl::NotFoundError(name);
    for (const auto& [k, v] : status.items()) nodes[name]["status"][k] = v;
    node_status_patches.push_back(name);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<nlohmann::json>> ListPods() override {
    std::vector<nlohmann::json> out;
    for (const auto& [key, pod] : pods) out.push_back(pod);
    return out;
  }
  absl::StatusOr<std::vector<nlohmann::json>> ListServices() override { return services; }
  absl::StatusOr<std::string> ReadKey(const std::string& kind, const std::string& ns,
                                      const std::string& name, const std::string& key) override {
    auto it = keys.find(absl::StrCat(kind, "/", ns, "/", name, "/", key));
    if (it == keys.end()) return absl::NotFoundError("not found");
    return it->second;
  }
  absl::Status Bind(const std::string& ns, const std::string& name, const std::string&,
                    const std::string& node_name) override {
    pods[ns + "/" + name]["spec"]["nodeName"] = node_name;
    bindings.push_back(ns + "/" + name);
    return absl::OkStatus();
  }
  absl::Status PatchPodStatus(const std::string& ns, const std::string& name,
                              const nlohmann::json& status) override {
    nlohmann::json& pod = pods[ns + "/" + name];
    for (const auto& [k, v] : status.items()) pod["status"][k] = v;
    ++status_patches;
    return absl::OkStatus();
  }
  absl::Status PatchPodAnnotations(const std::string& ns, const std::string& name,
                                   const nlohmann::json& annotations) override {
    nlohmann::json& pod = pods[ns + "/" + name];
    for (const auto& [k, v] : annotations.items()) pod["metadata"]["annotations"][k] = v;
    ++annotation_patches;
    return absl::OkStatus();
  }
  absl::Status DeletePod(const std::string& ns, const std::string& name,
                         const std::string&) override {
    auto it = pods.find(ns + "/" + name);
    if (it != pods.end() && it->second.contains("status")) {
      final_status[ns + "/" + name] = it->second["status"];
    }
    pods.erase(ns + "/" + name);
    deleted.push_back(ns + "/" + name);
    return absl::OkStatus();
  }

  nlohmann::json Pod(const std::string& key) { return pods.at(key); }

  nlohmann::json node;
  std::vector<nlohmann::json> leases;  // renewals, in order
  // For NodeMonitor: other agents' Nodes and Leases, by name.
  std::map<std::string, nlohmann::json> nodes, node_leases;
  std::vector<std::string> node_status_patches, node_spec_patches;
  std::map<std::string, nlohmann::json> pods;
  std::vector<nlohmann::json> services;
  std::map<std::string, std::string> keys;
  std::vector<std::string> bindings, deleted;
  // Each deleted pod's last status, as watchers saw it before it went.
  std::map<std::string, nlohmann::json> final_status;
  int status_patches = 0;
  int annotation_patches = 0;
};

}  // namespace kubetrain::node_agent

#endif  // KUBETRAIN_TESTS_TOOLS_NODE_AGENT_FAKE_NODE_API_H_
