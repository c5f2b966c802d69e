#include "tools/node_agent/container_env.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "operator/kube/object.h"

namespace kubetrain::node_agent {
namespace {

using Json = nlohmann::json;

// "metadata.labels['a.b/c']" -> "a.b/c" when `path` has that form for
// `prefix` ("metadata.labels").
bool SubscriptKey(const std::string& path, absl::string_view prefix, std::string* key) {
  const std::string open = absl::StrCat(prefix, "['");
  if (!absl::StartsWith(path, open) || !absl::EndsWith(path, "']")) return false;
  *key = path.substr(open.size(), path.size() - open.size() - 2);
  return true;
}

absl::StatusOr<std::string> FieldValue(const Json& pod, const std::string& path,
                                       const PodRuntimeFields& fields) {
  if (path == "metadata.name") return kube::Name(pod);
  if (path == "metadata.namespace") return kube::Namespace(pod);
  if (path == "metadata.uid") return kube::Uid(pod);
  if (path == "spec.nodeName") return fields.node_name;
  if (path == "spec.serviceAccountName") return kube::StringAt(pod, {"spec", "serviceAccountName"});
  if (path == "status.podIP" || path == "status.podIPs") return fields.pod_ip;
  if (path == "status.hostIP" || path == "status.hostIPs") return fields.host_ip;
  std::string key;
  if (SubscriptKey(path, "metadata.labels", &key)) return kube::Label(pod, key);
  if (SubscriptKey(path, "metadata.annotations", &key)) return kube::Annotation(pod, key);
  return absl::InvalidArgumentError(absl::StrCat("unsupported fieldRef.fieldPath \"", path, "\""));
}

}  // namespace

absl::StatusOr<api::EnvList> ContainerEnvironment(const Json& pod, const Json& container,
                                                  const PodRuntimeFields& fields,
                                                  const KeyLookup& lookup) {
  const std::string cname = kube::StringAt(container, {"name"});
  if (container.contains("envFrom")) {
    return absl::UnimplementedError(
        absl::StrCat("container ", cname, ": envFrom is not supported by the node agent"));
  }
  api::EnvList env;
  if (!container.contains("env") || !container["env"].is_array()) return env;
  for (const Json& entry : container["env"]) {
    const std::string name = kube::StringAt(entry, {"name"});
    if (name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("container ", cname, ": env entry without a name"));
    }
    if (!entry.contains("valueFrom")) {
      env.emplace_back(name, api::ExpandVars(kube::StringAt(entry, {"value"}), env));
      continue;
    }
    const Json& from = entry["valueFrom"];
    const std::string where = absl::StrCat("container ", cname, " env ", name, ": ");
    if (from.contains("fieldRef")) {
      absl::StatusOr<std::string> v =
          FieldValue(pod, kube::StringAt(from["fieldRef"], {"fieldPath"}), fields);
      if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat(where, v.status().message()));
      env.emplace_back(name, *v);
      continue;
    }
    const char* kind = nullptr;
    const Json* ref = nullptr;
    if (from.contains("secretKeyRef")) {
      kind = "Secret";
      ref = &from["secretKeyRef"];
    } else if (from.contains("configMapKeyRef")) {
      kind = "ConfigMap";
      ref = &from["configMapKeyRef"];
    } else {
      return absl::UnimplementedError(absl::StrCat(where, "unsupported valueFrom ", from.dump(),
                                                   " (the node agent reads "
                                                   "fieldRef, secretKeyRef and "
                                                   "configMapKeyRef)"));
    }
    const std::string object = kube::StringAt(*ref, {"name"});
    const std::string key = kube::StringAt(*ref, {"key"});
    const bool optional = ref->contains("optional") && (*ref)["optional"].is_boolean() &&
                          (*ref)["optional"].get<bool>();
    absl::StatusOr<std::string> v = lookup(kind, kube::Namespace(pod), object, key);
    if (!v.ok()) {
      if (optional && absl::IsNotFound(v.status())) continue;
      return absl::Status(v.status().code(), absl::StrCat(where, kind, " ", object, " key ", key,
                                                          ": ", v.status().message()));
    }
    env.emplace_back(name, *v);
  }
  return env;
}

absl::StatusOr<std::vector<std::string>> ContainerArgv(const Json& container,
                                                       const api::EnvList& env,
                                                       const std::string& entrypoint) {
  std::vector<std::string> argv;
  auto append = [&](const char* field) {
    if (!container.contains(field) || !container[field].is_array()) return;
    for (const Json& a : container[field]) {
      if (a.is_string()) argv.push_back(api::ExpandVars(a.get<std::string>(), env));
    }
  };
  append("command");
  if (argv.empty() && !entrypoint.empty()) argv.push_back(entrypoint);
  append("args");
  if (argv.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("container ",
                                                   kube::StringAt(container, {"name"}),
                                                   " has neither command nor args and no "
                                                   "entrypoint is configured"));
  }
  return argv;
}

}  // namespace kubetrain::node_agent
