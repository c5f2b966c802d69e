#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "operator/kube/api_error.h"
#include "operator/kube/object.h"
#include "tools/node_agent/node_api.h"

namespace kubetrain::node_agent {

using Json = nlohmann::json;

absl::Status KubeNodeApi::RegisterNode(const Json& node) {
  const std::string name = kube::Name(node);
  absl::StatusOr<Json> created = client_.Create(kube::kNodes, "", node);
  if (!created.ok() && !absl::IsAlreadyExists(created.status())) return created.status();
  // Create may drop status; write it through the status subresource.
  absl::StatusOr<Json> patched =
      client_.MergePatch(kube::kNodes, "", name, Json{{"status", node["status"]}}, "status");
  return patched.status();
}

absl::Status KubeNodeApi::RenewLease(const Json& lease) {
  const std::string ns = kube::Namespace(lease), name = kube::Name(lease);
  absl::StatusOr<Json> patched =
      client_.MergePatch(kube::kLeases, ns, name, Json{{"spec", lease["spec"]}});
  if (patched.ok() || !absl::IsNotFound(patched.status())) return patched.status();
  absl::StatusOr<Json> created = client_.Create(kube::kLeases, ns, lease);
  if (absl::IsAlreadyExists(created.status())) return absl::OkStatus();  // a race: next time
  return created.status();
}

absl::StatusOr<Json> KubeNodeApi::GetNode(const std::string& name) {
  return client_.Get(kube::kNodes, "", name);
}

absl::StatusOr<std::vector<Json>> KubeNodeApi::ListNodes(const std::string& label_selector) {
  kube::ListOptions options;
  options.label_selector = label_selector;
  absl::StatusOr<kube::ObjectList> list = client_.ListAll(kube::kNodes, "", options);
  if (!list.ok()) return list.status();
  return std::move(list->items);
}

absl::StatusOr<std::vector<Json>> KubeNodeApi::ListNodeLeases() {
  absl::StatusOr<kube::ObjectList> list = client_.ListAll(kube::kLeases, kNodeLeaseNamespace);
  if (!list.ok()) return list.status();
  return std::move(list->items);
}

absl::Status KubeNodeApi::PatchNodeStatus(const std::string& name, const Json& status) {
  return client_.MergePatch(kube::kNodes, "", name, Json{{"status", status}}, "status").status();
}

absl::Status KubeNodeApi::PatchNodeSpec(const std::string& name, const Json& spec) {
  return client_.MergePatch(kube::kNodes, "", name, Json{{"spec", spec}}).status();
}

absl::StatusOr<std::vector<Json>> KubeNodeApi::ListPods() {
  absl::StatusOr<kube::ObjectList> list = client_.ListAll(kube::kPods, "");
  if (!list.ok()) return list.status();
  return std::move(list->items);
}

absl::StatusOr<std::vector<Json>> KubeNodeApi::ListServices() {
  absl::StatusOr<kube::ObjectList> list = client_.ListAll(kube::kServices, "");
  if (!list.ok()) return list.status();
  return std::move(list->items);
}

absl::StatusOr<std::string> KubeNodeApi::ReadKey(const std::string& kind, const std::string& ns,
                                                 const std::string& name, const std::string& key) {
  const bool secret = kind == "Secret";
  absl::StatusOr<Json> object = client_.Get(secret ? kube::kSecrets : kube::kConfigMaps, ns, name);
  if (!object.ok()) return object.status();
  const std::string text = kube::StringAt(*object, {"data", key});
  if (!object->contains("data") || !(*object)["data"].is_object() ||
      !(*object)["data"].contains(key)) {
    return absl::NotFoundError(absl::StrCat("no key ", key));
  }
  if (!secret) return text;
  std::string decoded;
  if (!absl::Base64Unescape(text, &decoded)) {
    return absl::InvalidArgumentError(absl::StrCat("key ", key, " is not base64"));
  }
  return decoded;
}

absl::Status KubeNodeApi::Bind(const std::string& ns, const std::string& name,
                               const std::string& uid, const std::string& node) {
  Json binding{{"apiVersion", "v1"},
               {"kind", "Binding"},
               {"metadata", {{"name", name}, {"namespace", ns}, {"uid", uid}}},
               {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
  return client_.CreateSubresource(kube::kPods, ns, name, "binding", binding).status();
}

absl::Status KubeNodeApi::PatchPodStatus(const std::string& ns, const std::string& name,
                                         const Json& status) {
  return client_.MergePatch(kube::kPods, ns, name, Json{{"status", status}}, "status").status();
}

absl::Status KubeNodeApi::PatchPodAnnotations(const std::string& ns, const std::string& name,
                                              const Json& annotations) {
  return client_
      .MergePatch(kube::kPods, ns, name, Json{{"metadata", {{"annotations", annotations}}}})
      .status();
}

absl::Status KubeNodeApi::DeletePod(const std::string& ns, const std::string& name,
                                    const std::string& uid) {
  kube::DeleteOptions options;
  options.grace_period_seconds = 0;
  options.precondition_uid = uid;
  absl::StatusOr<Json> r = client_.Delete(kube::kPods, ns, name, options);
  if (!r.ok() && (absl::IsNotFound(r.status()) || kube::IsConflict(r.status()))) {
    return absl::OkStatus();  // gone, or a new pod of the same name
  }
  return r.status();
}

}  // namespace kubetrain::node_agent
