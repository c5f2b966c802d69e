// NodeApi: what the node agent reads and writes in the Kubernetes API, so the
// agent's decisions can be tested against a fake. KubeNodeApi is the real
// one over kube::KubeClient. Implementations are thread-safe.
#ifndef KUBETRAIN_TOOLS_NODE_AGENT_NODE_API_H_
#define KUBETRAIN_TOOLS_NODE_AGENT_NODE_API_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "operator/kube/kube_client.h"

namespace kubetrain::node_agent {

// Where nodes' heartbeat Leases live (as the kubelet's).
inline constexpr char kNodeLeaseNamespace[] = "kube-node-lease";
// The taints the node lifecycle controller manages: the API server's
// NodeTaint admission puts not-ready on every new Node, and the controller
// removes it once the node is Ready; unreachable marks a node whose
// heartbeat stopped.
inline constexpr char kTaintNotReady[] = "node.kubernetes.io/not-ready";
inline constexpr char kTaintUnreachable[] = "node.kubernetes.io/unreachable";

class NodeApi {
 public:
  virtual ~NodeApi() = default;
  // Creates the Node, or replaces the status of the one that exists.
  virtual absl::Status RegisterNode(const nlohmann::json& node) = 0;
  // Creates the node's Lease (coordination.k8s.io/v1, in kube-node-lease),
  // or merges `lease`'s spec into the one that exists: the heartbeat the
  // node lifecycle controller reads.
  virtual absl::Status RenewLease(const nlohmann::json& lease) = 0;
  // The Node named `name` (its labels, taints, cordon).
  virtual absl::StatusOr<nlohmann::json> GetNode(const std::string& name) = 0;
  // Nodes matching `label_selector`, and every Lease in kube-node-lease.
  virtual absl::StatusOr<std::vector<nlohmann::json>> ListNodes(
      const std::string& label_selector) = 0;
  virtual absl::StatusOr<std::vector<nlohmann::json>> ListNodeLeases() = 0;
  // Merge-patches the Node's status subresource.
  virtual absl::Status PatchNodeStatus(const std::string& name, const nlohmann::json& status) = 0;
  // Merge-patches the Node's spec (its taints).
  virtual absl::Status PatchNodeSpec(const std::string& name, const nlohmann::json& spec) = 0;
  // Every pod in every namespace.
  virtual absl::StatusOr<std::vector<nlohmann::json>> ListPods() = 0;
  // Every Service in every namespace.
  virtual absl::StatusOr<std::vector<nlohmann::json>> ListServices() = 0;
  // Key `key` of Secret or ConfigMap (`kind`), decoded. NotFound when the
  // object or key is missing.
  virtual absl::StatusOr<std::string> ReadKey(const std::string& kind, const std::string& ns,
                                              const std::string& name, const std::string& key) = 0;
  // Binds the pod to `node` (the pods/binding subresource).
  virtual absl::Status Bind(const std::string& ns, const std::string& name, const std::string& uid,
                            const std::string& node) = 0;
  // Merge-patches the pod's status subresource.
  virtual absl::Status PatchPodStatus(const std::string& ns, const std::string& name,
                                      const nlohmann::json& status) = 0;
  // Merge-patches metadata.annotations of the pod (string values).
  virtual absl::Status PatchPodAnnotations(const std::string& ns, const std::string& name,
                                           const nlohmann::json& annotations) = 0;
  // Deletes the pod for good (grace period 0, precondition on uid): the
  // kubelet's last step after its containers stopped.
  virtual absl::Status DeletePod(const std::string& ns, const std::string& name,
                                 const std::string& uid) = 0;
};

class KubeNodeApi final : public NodeApi {
 public:
  // Borrows `client`.
  explicit KubeNodeApi(kube::KubeClient& client) : client_(client) {}
  absl::Status RegisterNode(const nlohmann::json& node) override;
  absl::Status RenewLease(const nlohmann::json& lease) override;
  absl::StatusOr<nlohmann::json> GetNode(const std::string& name) override;
  absl::StatusOr<std::vector<nlohmann::json>> ListNodes(const std::string& label_selector) override;
  absl::StatusOr<std::vector<nlohmann::json>> ListNodeLeases() override;
  absl::Status PatchNodeStatus(const std::string& name, const nlohmann::json& status) override;
  absl::Status PatchNodeSpec(const std::string& name, const nlohmann::json& spec) override;
  absl::StatusOr<std::vector<nlohmann::json>> ListPods() override;
  absl::StatusOr<std::vector<nlohmann::json>> ListServices() override;
  absl::StatusOr<std::string> ReadKey(const std::string& kind, const std::string& ns,
                                      const std::string& name, const std::string& key) override;
  absl::Status Bind(const std::string& ns, const std::string& name, const std::string& uid,
                    const std::string& node) override;
  absl::Status PatchPodStatus(const std::string& ns, const std::string& name,
                              const nlohmann::json& status) override;
  absl::Status PatchPodAnnotations(const std::string& ns, const std::string& name,
                                   const nlohmann::json& annotations) override;
  absl::Status DeletePod(const std::string& ns, const std::string& name,
                         const std::string& uid) override;

 private:
  kube::KubeClient& client_;
};

}  // namespace kubetrain::node_agent

#endif  // KUBETRAIN_TOOLS_NODE_AGENT_NODE_API_H_
