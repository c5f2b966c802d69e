#include "testing/kube_emulator_discovery.h"

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kubetrain::testing {
namespace {

using json = nlohmann::json;

std::vector<std::string> Strings(const json& j) {
  std::vector<std::string> out;
  if (!j.is_array()) return out;
  for (const json& s : j) {
    if (s.is_string()) out.push_back(s.get<std::string>());
  }
  return out;
}

// Group-versions in ServedResources() order, core first.
std::vector<std::pair<std::string, std::string>> GroupVersions() {
  std::vector<std::pair<std::string, std::string>> out;
  std::set<std::pair<std::string, std::string>> seen;
  for (const ResourceType& rt : ServedResources()) {
    if (seen.insert({rt.group, rt.version}).second) out.emplace_back(rt.group, rt.version);
  }
  return out;
}

OrderedJson ResourceList(const std::string& group, const std::string& version,
                         const Presentations& presentations) {
  OrderedJson list = OrderedJson::object();
  list["kind"] = "APIResourceList";
  if (!group.empty()) list["apiVersion"] = "v1";
  list["groupVersion"] = group.empty() ? version : absl::StrCat(group, "/", version);
  OrderedJson resources = OrderedJson::array();
  for (const ResourceType& rt : ServedResources()) {
    if (rt.group != group || rt.version != version) continue;
    auto p = presentations.find(rt.GroupResource());
    OrderedJson r = OrderedJson::object();
    r["name"] = rt.plural;
    r["singularName"] = p != presentations.end() ? p->second.singular : "";
    r["namespaced"] = rt.namespaced;
    r["kind"] = rt.kind;
    r["verbs"] =
        rt.namespaced || rt.plural != "namespaces"
            ? OrderedJson::array({"create", "delete", "deletecollection", "get", "list", "patch",
                                  "update", "watch"})
            : OrderedJson::array({"create", "delete", "get", "list", "patch", "update", "watch"});
    if (p != presentations.end() && !p->second.short_names.empty()) {
      r["shortNames"] = p->second.short_names;
    }
    if (p != presentations.end() && !p->second.categories.empty()) {
      r["categories"] = p->second.categories;
    }
    resources.push_back(r);
    if (rt.has_status) {
      resources.push_back({{"name", rt.plural + "/status"},
                           {"singularName", ""},
                           {"namespaced", rt.namespaced},
                           {"kind", rt.kind},
                           {"verbs", {"get", "patch", "update"}}});
    }
    if (p != presentations.end() && p->second.scale) {
      resources.push_back({{"name", rt.plural + "/scale"},
                           {"singularName", ""},
                           {"namespaced", rt.namespaced},
                           {"group", "autoscaling"},
                           {"version", "v1"},
                           {"kind", "Scale"},
                           {"verbs", {"get", "patch", "update"}}});
    }
    if (rt.group.empty() && rt.plural == "pods") {
      resources.push_back({{"name", "pods/binding"},
                           {"singularName", ""},
                           {"namespaced", true},
                           {"kind", "Binding"},
                           {"verbs", {"create"}}});
      // Forwarded to the node's kubelet and to the pod (kube_emulator_pod_proxy.h).
      resources.push_back({{"name", "pods/log"},
                           {"singularName", ""},
                           {"namespaced", true},
                           {"kind", "Pod"},
                           {"verbs", {"get"}}});
      resources.push_back({{"name", "pods/proxy"},
                           {"singularName", ""},
                           {"namespaced", true},
                           {"kind", "PodProxyOptions"},
                           {"verbs", {"create", "delete", "get", "patch", "update"}}});
    }
  }
  list["resources"] = resources;
  return list;
}

std::string ApiPrefix(const std::string& group, const std::string& version) {
  return group.empty() ? absl::StrCat("api/", version) : absl::StrCat("apis/", group, "/", version);
}

// One group-version's OpenAPI v3 document: each resource's PATCH with the
// fieldValidation query parameter and its group-version-kind, which is what
// kubectl reads to decide that the server validates fields itself.
OrderedJson OpenApiV3(const std::string& group, const std::string& version) {
  OrderedJson paths = OrderedJson::object();
  for (const ResourceType& rt : ServedResources()) {
    if (rt.group != group || rt.version != version) continue;
    const std::string path =
        absl::StrCat("/", ApiPrefix(group, version),
                     rt.namespaced ? "/namespaces/{namespace}/" : "/", rt.plural, "/{name}");
    OrderedJson patch = OrderedJson::object();
    patch["operationId"] = absl::StrCat("patch", rt.kind);
    patch["parameters"] = OrderedJson::array(
        {{{"name", "fieldValidation"}, {"in", "query"}, {"schema", {{"type", "string"}}}}});
    patch["responses"] = {{"200", {{"description", "OK"}}}};
    patch["x-kubernetes-action"] = "patch";
    patch["x-kubernetes-group-version-kind"] = {
        {"group", rt.group}, {"version", rt.version}, {"kind", rt.kind}};
    paths[path] = {{"patch", patch}};
  }
  OrderedJson doc = OrderedJson::object();
  doc["openapi"] = "3.0.0";
  doc["info"] = {{"title", "Kubernetes"}, {"version", "v1.20.2"}};
  doc["paths"] = paths;
  doc["components"] = {{"schemas", OrderedJson::object()}};
  return doc;
}

}  // namespace

absl::StatusOr<std::pair<std::string, ResourcePresentation>> ResourcePresentation::FromCrd(
    const json& crd, const std::string& version) {
  if (!crd.is_object() || crd.value("kind", std::string()) != "CustomResourceDefinition") {
    return absl::InvalidArgumentError("not a CustomResourceDefinition");
  }
  const json spec = crd.value("spec", json::object());
  const json names = spec.value("names", json::object());
  const std::string group = spec.value("group", std::string());
  const std::string plural = names.value("plural", std::string());
  if (group.empty() || plural.empty()) {
    return absl::InvalidArgumentError("spec.group and spec.names.plural are required");
  }
  ResourcePresentation p;
  p.singular = names.value("singular", std::string());
  p.short_names = Strings(names.value("shortNames", json::array()));
  p.categories = Strings(names.value("categories", json::array()));
  bool found = false;
  for (const json& v : spec.value("versions", json::array())) {
    if (!v.is_object()) continue;
    if (version.empty() ? !v.value("storage", false) : v.value("name", std::string()) != version) {
      continue;
    }
    found = true;
    const json subresources = v.value("subresources", json::object());
    if (subresources.is_object() && subresources.contains("scale") &&
        subresources["scale"].is_object()) {
      const json& sc = subresources["scale"];
      ScaleSubresource scale;
      scale.spec_replicas_path = sc.value("specReplicasPath", std::string());
      scale.status_replicas_path = sc.value("statusReplicasPath", std::string());
      scale.label_selector_path = sc.value("labelSelectorPath", std::string());
      if (scale.spec_replicas_path.rfind(".spec.", 0) != 0 ||
          scale.status_replicas_path.rfind(".status.", 0) != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(plural,
                         ": subresources.scale needs specReplicasPath under .spec and "
                         "statusReplicasPath under .status"));
      }
      p.scale = scale;
    }
    for (const json& c : v.value("additionalPrinterColumns", json::array())) {
      if (!c.is_object()) continue;
      PrinterColumn col;
      col.name = c.value("name", std::string());
      col.type = c.value("type", std::string("string"));
      col.format = c.value("format", std::string());
      col.json_path = c.value("jsonPath", std::string());
      col.description = c.value(
          "description",
          absl::StrCat("Custom resource definition column (in JSONPath format): ", col.json_path));
      col.priority = c.value("priority", 0);
      if (col.name.empty() || col.json_path.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(plural, ": a printer column needs a name and a jsonPath"));
      }
      p.columns.push_back(col);
    }
  }
  if (!found) {
    return absl::InvalidArgumentError(absl::StrCat(
        plural, ": no ", version.empty() ? std::string("storage") : version, " version"));
  }
  return std::make_pair(absl::StrCat(plural, ".", group), p);
}

Presentations WithBuiltinPresentations(Presentations custom) {
  const std::vector<std::tuple<std::string, std::vector<std::string>, std::vector<std::string>>>
      builtins = {{"pods", {"po"}, {"all"}},  {"services", {"svc"}, {"all"}},
                  {"events", {"ev"}, {}},     {"secrets", {}, {}},
                  {"configmaps", {"cm"}, {}}, {"namespaces", {"ns"}, {}},
                  {"nodes", {"no"}, {}},      {"leases.coordination.k8s.io", {}, {}}};
  for (const auto& [resource, short_names, categories] : builtins) {
    ResourcePresentation& p = custom[resource];
    p.short_names = short_names;
    p.categories = categories;
  }
  return custom;
}

std::optional<OrderedJson> DiscoveryDocument(const std::string& path,
                                             const Presentations& presentations,
                                             const std::string& server) {
  const std::vector<std::pair<std::string, std::string>> gvs = GroupVersions();
  if (path == "/api") {
    OrderedJson v = OrderedJson::object();
    v["kind"] = "APIVersions";
    v["versions"] = {"v1"};
    v["serverAddressByClientCIDRs"] = {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", server}}};
    return v;
  }
  if (path == "/apis") {
    OrderedJson groups = OrderedJson::array();
    for (const auto& [group, version] : gvs) {
      if (group.empty()) continue;
      const OrderedJson gv = {{"groupVersion", absl::StrCat(group, "/", version)},
                              {"version", version}};
      groups.push_back({{"name", group}, {"versions", {gv}}, {"preferredVersion", gv}});
    }
    OrderedJson list = OrderedJson::object();
    list["kind"] = "APIGroupList";
    list["apiVersion"] = "v1";
    list["groups"] = groups;
    return list;
  }
  if (path == "/openapi/v3") {
    OrderedJson paths = OrderedJson::object();
    for (const auto& [group, version] : gvs) {
      const std::string prefix = ApiPrefix(group, version);
      paths[prefix] = {{"serverRelativeURL", absl::StrCat("/openapi/v3/", prefix, "?hash=0")}};
    }
    return OrderedJson{{"paths", paths}};
  }
  for (const auto& [group, version] : gvs) {
    const std::string prefix = ApiPrefix(group, version);
    if (path == "/" + prefix) return ResourceList(group, version, presentations);
    if (path == "/openapi/v3/" + prefix) return OpenApiV3(group, version);
  }
  // /apis/<group>: the group with its versions.
  for (const auto& [group, version] : gvs) {
    if (group.empty() || path != "/apis/" + group) continue;
    const OrderedJson gv = {{"groupVersion", absl::StrCat(group, "/", version)},
                            {"version", version}};
    OrderedJson g = OrderedJson::object();
    g["kind"] = "APIGroup";
    g["apiVersion"] = "v1";
    g["name"] = group;
    g["versions"] = {gv};
    g["preferredVersion"] = gv;
    return g;
  }
  return std::nullopt;
}

}  // namespace kubetrain::testing
