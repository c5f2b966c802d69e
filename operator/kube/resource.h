// The Kubernetes resources the operator uses and the REST paths that reach
// them. Value types; thread-safe.
//
//   ResourcePath(kPods, "ns", "p", "status") == "/api/v1/namespaces/ns/pods/p/status"
//   ResourcePath(kTrainingJobs, "", "", "")  == "/apis/kubetrain.io/v1alpha1/trainingjobs"
#ifndef KUBETRAIN_OPERATOR_KUBE_RESOURCE_H_
#define KUBETRAIN_OPERATOR_KUBE_RESOURCE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace kubetrain::kube {

struct ResourceType {
  absl::string_view group;    // "" for the core group
  absl::string_view version;  // "v1"
  absl::string_view plural;   // "pods"
  absl::string_view kind;     // "Pod"
  bool namespaced = true;
  bool custom = false;  // a custom resource (CRD): JSON patch rules differ

  // "v1" or "group/version": the objects' apiVersion field.
  std::string ApiVersion() const;
  // "pods" or "trainingjobs.kubetrain.io", as error messages name it.
  std::string QualifiedName() const;
};

inline constexpr ResourceType kPods{"", "v1", "pods", "Pod"};
inline constexpr ResourceType kServices{"", "v1", "services", "Service"};
inline constexpr ResourceType kEvents{"", "v1", "events", "Event"};
inline constexpr ResourceType kSecrets{"", "v1", "secrets", "Secret"};
inline constexpr ResourceType kConfigMaps{"", "v1", "configmaps", "ConfigMap"};
inline constexpr ResourceType kNamespaces{"", "v1", "namespaces", "Namespace", false};
inline constexpr ResourceType kNodes{"", "v1", "nodes", "Node", false};
inline constexpr ResourceType kLeases{"coordination.k8s.io", "v1", "leases", "Lease"};
inline constexpr ResourceType kValidatingWebhookConfigurations{
    "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration", false};
inline constexpr ResourceType kTrainingJobs{"kubetrain.io", "v1alpha1", "trainingjobs",
                                            "TrainingJob",  true,       true};
inline constexpr ResourceType kPodGroups{
    "scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", true, true};

// Collection or object path. `ns` empty on a namespaced type means "all
// namespaces" (collections only). `name` empty means the collection.
std::string ResourcePath(const ResourceType& type, absl::string_view ns,
                         absl::string_view name = "", absl::string_view subresource = "");

// Percent-encodes a query value (RFC 3986 unreserved characters pass).
std::string QueryEscape(absl::string_view value);

// "?a=1&b=x%20y" from pairs whose value is non-empty; "" when none.
std::string QueryString(const std::vector<std::pair<std::string, std::string>>& params);

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_OPERATOR_KUBE_RESOURCE_H_
