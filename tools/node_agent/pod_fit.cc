#include "tools/node_agent/pod_fit.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "operator/kube/object.h"
#include "tools/node_agent/quantity.h"

namespace kubetrain::node_agent {
namespace {

using Json = nlohmann::json;

std::string QuantityText(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_integer()) return absl::StrCat(value.get<int64_t>());
  if (value.is_number()) return absl::StrCat(value.get<double>());
  return "";
}

// One container's requests.
absl::StatusOr<Resources> ContainerRequests(const Json& container) {
  Resources r;
  const Json* resources = nullptr;
  if (container.contains("resources") && container["resources"].is_object()) {
    resources = &container["resources"];
  }
  if (resources == nullptr) return r;
  auto read = [&](const char* name, int64_t scale, int64_t* out) -> absl::Status {
    for (const char* field : {"requests", "limits"}) {
      if (!resources->contains(field) || !(*resources)[field].is_object()) continue;
      const Json& values = (*resources)[field];
      if (!values.contains(name)) continue;
      absl::StatusOr<int64_t> q = ParseQuantity(QuantityText(values[name]), scale);
      if (!q.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("container ", kube::StringAt(container, {"name"}), " ", field, ".", name,
                         ": ", q.status().message()));
      }
      *out = *q;
      return absl::OkStatus();  // the request, else the limit
    }
    return absl::OkStatus();
  };
  if (absl::Status s = read("cpu", 1000, &r.cpu_millis); !s.ok()) return s;
  if (absl::Status s = read("memory", 1, &r.memory_bytes); !s.ok()) return s;
  return r;
}

}  // namespace

absl::StatusOr<Resources> PodRequests(const Json& pod) {
  Resources total;
  Resources init;
  const Json spec = pod.contains("spec") ? pod["spec"] : Json::object();
  for (const char* list : {"containers", "initContainers"}) {
    if (!spec.contains(list) || !spec[list].is_array()) continue;
    for (const Json& container : spec[list]) {
      absl::StatusOr<Resources> r = ContainerRequests(container);
      if (!r.ok()) return r.status();
      if (std::string(list) == "containers") {
        total.cpu_millis += r->cpu_millis;
        total.memory_bytes += r->memory_bytes;
      } else {
        init.cpu_millis = std::max(init.cpu_millis, r->cpu_millis);
        init.memory_bytes = std::max(init.memory_bytes, r->memory_bytes);
      }
    }
  }
  total.cpu_millis = std::max(total.cpu_millis, init.cpu_millis);
  total.memory_bytes = std::max(total.memory_bytes, init.memory_bytes);
  total.pods = 1;
  return total;
}

bool IsTerminal(const Json& pod) {
  const std::string phase = kube::StringAt(pod, {"status", "phase"});
  return phase == "Succeeded" || phase == "Failed";
}

std::string FitFailure(const Resources& capacity, const Resources& used, const Resources& request) {
  std::vector<std::string> reasons;
  if (used.pods + request.pods > capacity.pods) reasons.push_back("Too many pods");
  if (used.cpu_millis + request.cpu_millis > capacity.cpu_millis) {
    reasons.push_back(absl::StrCat("Insufficient cpu (requests ", request.cpu_millis, "m, free ",
                                   capacity.cpu_millis - used.cpu_millis, "m)"));
  }
  if (used.memory_bytes + request.memory_bytes > capacity.memory_bytes) {
    reasons.push_back(absl::StrCat("Insufficient memory (requests ", request.memory_bytes,
                                   " bytes, free ", capacity.memory_bytes - used.memory_bytes,
                                   " bytes)"));
  }
  return absl::StrJoin(reasons, ", ");
}

Resources UsedOnNode(const std::vector<Json>& pods, const std::string& node_name) {
  Resources used;
  for (const Json& pod : pods) {
    if (kube::StringAt(pod, {"spec", "nodeName"}) != node_name || IsTerminal(pod)) continue;
    absl::StatusOr<Resources> r = PodRequests(pod);
    if (!r.ok()) continue;
    used.cpu_millis += r->cpu_millis;
    used.memory_bytes += r->memory_bytes;
    used.pods += r->pods;
  }
  return used;
}

namespace {

// A toleration matches a taint (the scheduler's ToleratesTaint): the same
// key (or an empty key with Exists: every taint), Exists or an equal value
// (Equal is the default operator), and the same effect (or none: every
// effect).
bool Tolerates(const nlohmann::json& toleration, const nlohmann::json& taint) {
  if (!toleration.is_object()) return false;
  const std::string key = toleration.value("key", "");
  const std::string op = toleration.value("operator", "Equal");
  const std::string effect = toleration.value("effect", "");
  if (!effect.empty() && effect != taint.value("effect", "")) return false;
  if (key.empty()) return op == "Exists";
  if (key != taint.value("key", "")) return false;
  if (op == "Exists") return true;
  return toleration.value("value", "") == taint.value("value", "");
}

const nlohmann::json& Field(const nlohmann::json& obj, const char* a, const char* b) {
  static const nlohmann::json kNull;
  if (!obj.is_object() || !obj.contains(a) || !obj[a].is_object() || !obj[a].contains(b)) {
    return kNull;
  }
  return obj[a][b];
}

}  // namespace

std::string PlacementFailure(const nlohmann::json& pod, const nlohmann::json& node) {
  const nlohmann::json& selector = Field(pod, "spec", "nodeSelector");
  const nlohmann::json& labels = Field(node, "metadata", "labels");
  if (selector.is_object()) {
    for (const auto& [k, v] : selector.items()) {
      if (!labels.is_object() || !labels.contains(k) || labels[k] != v) {
        return "node(s) didn't match Pod's node affinity/selector";
      }
    }
  }
  const nlohmann::json& unschedulable = Field(node, "spec", "unschedulable");
  const nlohmann::json& tolerations = Field(pod, "spec", "tolerations");
  auto tolerated = [&](const nlohmann::json& taint) {
    if (!tolerations.is_array()) return false;
    for (const nlohmann::json& t : tolerations) {
      if (Tolerates(t, taint)) return true;
    }
    return false;
  };
  if (unschedulable.is_boolean() && unschedulable.get<bool>() &&
      !tolerated(
          nlohmann::json{{"key", "node.kubernetes.io/unschedulable"}, {"effect", "NoSchedule"}})) {
    return "node(s) were unschedulable";
  }
  const nlohmann::json& taints = Field(node, "spec", "taints");
  if (taints.is_array()) {
    for (const nlohmann::json& taint : taints) {
      if (!taint.is_object()) continue;
      const std::string effect = taint.value("effect", "");
      if (effect != "NoSchedule" && effect != "NoExecute") continue;
      if (tolerated(taint)) continue;
      return "node(s) had untolerated taint {" + taint.value("key", "") + ": " +
             taint.value("value", "") + "}";
    }
  }
  return "";
}

}  // namespace kubetrain::node_agent
