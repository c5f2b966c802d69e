#include "testing/kube_emulator_store.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "testing/kube_emulator_admission.h"
#include "testing/kube_emulator_patch.h"

namespace kubetrain::testing {

using json = nlohmann::json;

namespace {

constexpr char kDns1123Subdomain[] =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
constexpr char kDns1123Label[] =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
constexpr char kDns1035Label[] =
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
constexpr char kPodUpdateForbidden[] =
    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
    "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds` or `spec.tolerations` (only "
    "additions to existing tolerations)";

std::string Quote(const std::string& s) { return json(s).dump(); }

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

bool IsDns1123Label(const std::string& s) {
  if (s.empty() || s.size() > 63 || !IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) { return IsLowerAlnum(c) || c == '-'; });
}

bool IsDns1123Subdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  for (absl::string_view part : absl::StrSplit(s, '.')) {
    if (!IsDns1123Label(std::string(part))) return false;
  }
  return true;
}

std::string NowRfc3339(absl::Duration offset = absl::ZeroDuration()) {
  return absl::FormatTime("%Y-%m-%d%ET%H:%M:%SZ", absl::Now() + offset, absl::UTCTimeZone());
}

std::string NewUid() {
  thread_local absl::BitGen gen;
  std::string hex;
  for (int i = 0; i < 16; ++i) {
    unsigned v = absl::Uniform<unsigned>(gen, 0, 256);
    if (i == 6) v = (v & 0x0f) | 0x40;
    if (i == 8) v = (v & 0x3f) | 0x80;
    absl::StrAppend(&hex, absl::StrFormat("%02x", v));
  }
  return absl::StrCat(hex.substr(0, 8), "-", hex.substr(8, 4), "-", hex.substr(12, 4), "-",
                      hex.substr(16, 4), "-", hex.substr(20, 12));
}

std::string RandomSuffix() {
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  thread_local absl::BitGen gen;
  std::string out;
  for (int i = 0; i < 5; ++i) out.push_back(kAlphabet[absl::Uniform<int>(gen, 0, 27)]);
  return out;
}

std::string KeyOf(const std::string& ns, const std::string& name) {
  return ns.empty() ? name : absl::StrCat(ns, "/", name);
}

std::string StrField(const json& obj, const char* a, const char* b = nullptr) {
  if (!obj.is_object() || !obj.contains(a)) return "";
  const json& x = obj[a];
  if (b == nullptr) return x.is_string() ? x.get<std::string>() : "";
  if (!x.is_object() || !x.contains(b) || !x[b].is_string()) return "";
  return x[b].get<std::string>();
}

json* Meta(json& obj) {
  if (!obj.contains("metadata") || !obj["metadata"].is_object()) obj["metadata"] = json::object();
  return &obj["metadata"];
}

// Dotted leaf paths of the client-owned parts of an object (managedFields stand-in).
void CollectPaths(const json& v, const std::string& prefix, std::set<std::string>* out) {
  if (v.is_object() && !v.empty()) {
    for (const auto& [k, x] : v.items()) CollectPaths(x, absl::StrCat(prefix, ".", k), out);
  } else {
    out->insert(prefix);
  }
}
std::set<std::string> OwnedPaths(const json& obj) {
  std::set<std::string> out;
  if (!obj.is_object()) return out;
  for (const auto& [k, v] : obj.items()) {
    if (k == "apiVersion" || k == "kind") continue;
    if (k == "metadata") {
      if (!v.is_object()) continue;
      for (const char* f : {"labels", "annotations", "finalizers", "ownerReferences"}) {
        if (v.contains(f)) CollectPaths(v[f], absl::StrCat("metadata.", f), &out);
      }
      continue;
    }
    CollectPaths(v, k, &out);
  }
  return out;
}
const json* AtPath(const json& obj, const std::string& path) {
  const json* cur = &obj;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(std::string(part));
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}
// owned' = (owned ∩ paths(request)) ∪ {p in paths(request) : request[p] != live[p]}
std::set<std::string> UpdateOwned(const std::set<std::string>& owned, const json& request,
                                  const json& live) {
  std::set<std::string> req = OwnedPaths(request);
  std::set<std::string> out;
  for (const std::string& p : req) {
    if (owned.count(p)) {
      out.insert(p);
      continue;
    }
    const json* a = AtPath(request, p);
    const json* b = AtPath(live, p);
    if (b == nullptr || a == nullptr || *a != *b) out.insert(p);
  }
  return out;
}

// --- wire order for built-in kinds (custom resources keep sorted keys) ---
OrderedJson OrderedCopy(const json& v) {
  if (v.is_object()) {
    OrderedJson o = OrderedJson::object();
    for (const auto& [k, x] : v.items()) o[k] = OrderedCopy(x);
    return o;
  }
  if (v.is_array()) {
    OrderedJson a = OrderedJson::array();
    for (const json& x : v) a.push_back(OrderedCopy(x));
    return a;
  }
  return OrderedJson::parse(v.dump());
}

OrderedJson OrderedMeta(const json& meta) {
  static const char* kOrder[] = {"name",
                                 "generateName",
                                 "namespace",
                                 "selfLink",
                                 "uid",
                                 "resourceVersion",
                                 "generation",
                                 "creationTimestamp",
                                 "deletionTimestamp",
                                 "deletionGracePeriodSeconds",
                                 "labels",
                                 "annotations",
                                 "ownerReferences",
                                 "finalizers",
                                 "clusterName",
                                 "managedFields"};
  OrderedJson out = OrderedJson::object();
  for (const char* k : kOrder) {
    if (meta.contains(k)) out[k] = OrderedCopy(meta[k]);
  }
  for (const auto& [k, v] : meta.items()) {
    if (!out.contains(k)) out[k] = OrderedCopy(v);
  }
  return out;
}

OrderedJson Present(const ResourceType& rt, const json& obj, bool type_meta = true) {
  if (rt.custom) return OrderedCopy(obj);
  OrderedJson out = OrderedJson::object();
  if (type_meta) {
    out["kind"] = rt.kind;
    out["apiVersion"] = rt.ApiVersion();
  }
  if (obj.contains("metadata")) out["metadata"] = OrderedMeta(obj["metadata"]);
  for (const auto& [k, v] : obj.items()) {
    if (k == "kind" || k == "apiVersion" || k == "metadata" || k == "status") continue;
    out[k] = OrderedCopy(v);
  }
  if (obj.contains("status")) out["status"] = OrderedCopy(obj["status"]);
  return out;
}

StatusDetails Details(const ResourceType& rt, const std::string& name) {
  StatusDetails d;
  d.name = name;
  d.group = rt.group;
  d.kind = rt.plural;
  return d;
}

ApiResult NotFound(const ResourceType& rt, const std::string& name) {
  return StatusResult(404, "NotFound",
                      absl::StrCat(rt.GroupResource(), " ", Quote(name), " not found"),
                      Details(rt, name));
}

ApiResult Conflict(const ResourceType& rt, const std::string& name, const std::string& what) {
  return StatusResult(409, "Conflict",
                      absl::StrCat("Operation cannot be fulfilled on ", rt.GroupResource(), " ",
                                   Quote(name), ": ", what),
                      Details(rt, name));
}

ApiResult Modified(const ResourceType& rt, const std::string& name) {
  return Conflict(rt, name,
                  "the object has been modified; please apply your changes to the latest version "
                  "and try again");
}

// 422 naming the kind ("Pod \"x\" is invalid: ...").
ApiResult Invalid(const ResourceType& rt, const std::string& name,
                  const std::vector<StatusCause>& causes) {
  std::vector<std::string> parts;
  for (const StatusCause& c : causes) parts.push_back(absl::StrCat(c.field, ": ", c.message));
  std::string joined =
      parts.size() == 1 ? parts[0] : absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
  StatusDetails d;
  d.name = name;
  d.group = rt.group;
  d.kind = rt.kind;
  d.causes = causes;
  return StatusResult(422, "Invalid",
                      absl::StrCat(rt.GroupKind(), " ", Quote(name), " is invalid: ", joined), d);
}

StatusCause InvalidValue(const std::string& field, const std::string& value_repr,
                         const std::string& msg) {
  return {"FieldValueInvalid", absl::StrCat("Invalid value: ", value_repr, ": ", msg), field};
}

ApiResult BadRequest(const std::string& message) {
  return StatusResult(400, "BadRequest", message, std::nullopt);
}

ApiResult InternalNoReason(const std::string& message) {
  return StatusResult(500, "", message, std::nullopt);
}

bool ParseRv(const std::string& s, int64_t* out) {
  uint64_t v = 0;
  if (s.empty() || !absl::SimpleAtoi(s, &v) || !std::all_of(s.begin(), s.end(), ::isdigit)) {
    return false;
  }
  *out = static_cast<int64_t>(v);
  return true;
}

// Field selectors the apiserver supports per resource.
bool FieldSupported(const ResourceType& rt, const std::string& field) {
  if (field == "metadata.name" || field == "metadata.namespace") return true;
  if (rt.plural == "pods") {
    return field == "status.phase" || field == "spec.nodeName" || field == "spec.restartPolicy" ||
           field == "spec.schedulerName" || field == "spec.serviceAccountName" ||
           field == "status.podIP" || field == "status.nominatedNodeName";
  }
  if (rt.plural == "events") {
    return absl::StartsWith(field, "involvedObject.") || field == "reason" || field == "type" ||
           field == "source" || field == "reportingComponent";
  }
  if (rt.plural == "secrets") return field == "type";
  if (rt.plural == "namespaces") return field == "status.phase";
  return false;
}

std::string FieldValue(const json& obj, const std::string& field) {
  if (field == "source") return StrField(obj, "source", "component");
  const json* v = AtPath(obj, field);
  if (v == nullptr || v->is_null()) return "";
  if (v->is_string()) return v->get<std::string>();
  return v->dump();
}

bool Selected(const ResourceType& rt, const json& obj, const ListOptions& o) {
  (void)rt;
  if (!o.labels.Matches(obj.contains("metadata") && obj["metadata"].contains("labels")
                            ? obj["metadata"]["labels"]
                            : json())) {
    return false;
  }
  for (const FieldRequirement& f : o.fields) {
    bool eq = FieldValue(obj, f.field) == f.value;
    if (eq != f.equals) return false;
  }
  return true;
}

std::string EncodeContinue(int64_t rv, const std::string& start) {
  OrderedJson t = OrderedJson::object();
  t["v"] = "meta.k8s.io/v1";
  t["rv"] = rv;
  t["start"] = absl::StrCat(start, std::string(1, '\0'));
  std::string b64 = absl::WebSafeBase64Escape(t.dump());
  return b64;
}

// --- per-kind defaults and validation ---
void DefaultPod(json& pod, const std::string& token) {
  json& spec = pod["spec"];
  if (!spec.is_object()) return;
  bool has_resources = false;
  bool guaranteed = true;
  if (spec.contains("containers") && spec["containers"].is_array()) {
    for (json& c : spec["containers"]) {
      if (!c.is_object()) continue;
      if (!c.contains("resources")) c["resources"] = json::object();
      if (!c.contains("terminationMessagePath"))
        c["terminationMessagePath"] = "/dev/termination-log";
      if (!c.contains("terminationMessagePolicy")) c["terminationMessagePolicy"] = "File";
      if (!c.contains("imagePullPolicy")) {
        std::string image = c.value("image", std::string());
        size_t slash = image.rfind('/');
        std::string last = slash == std::string::npos ? image : image.substr(slash + 1);
        bool latest = last.find(':') == std::string::npos || absl::EndsWith(image, ":latest");
        c["imagePullPolicy"] = latest ? "Always" : "IfNotPresent";
      }
      const json& r = c["resources"];
      if (r.is_object() && !r.empty()) has_resources = true;
      json limits = r.is_object() ? r.value("limits", json::object()) : json::object();
      json requests = r.is_object() ? r.value("requests", limits) : json::object();
      if (!limits.contains("cpu") || !limits.contains("memory") || limits != requests) {
        guaranteed = false;
      }
      if (!token.empty() && spec.value("automountServiceAccountToken", true)) {
        json mount = {{"name", token},
                      {"readOnly", true},
                      {"mountPath", "/var/run/secrets/kubernetes.io/serviceaccount"}};
        if (!c.contains("volumeMounts")) c["volumeMounts"] = json::array();
        bool present = false;
        for (const json& m : c["volumeMounts"]) present = present || m == mount;
        if (!present) c["volumeMounts"].push_back(mount);
      }
    }
  }
  if (!token.empty() && spec.value("automountServiceAccountToken", true)) {
    json vol = {{"name", token}, {"secret", {{"secretName", token}, {"defaultMode", 420}}}};
    if (!spec.contains("volumes")) spec["volumes"] = json::array();
    bool present = false;
    for (const json& v : spec["volumes"]) present = present || v == vol;
    if (!present) spec["volumes"].push_back(vol);
  }
  auto def = [&](const char* k, json v) {
    if (!spec.contains(k)) spec[k] = std::move(v);
  };
  def("restartPolicy", "Always");
  def("terminationGracePeriodSeconds", 30);
  def("dnsPolicy", "ClusterFirst");
  def("serviceAccountName", "default");
  def("serviceAccount", spec["serviceAccountName"]);
  def("securityContext", json::object());
  def("schedulerName", "default-scheduler");
  def("tolerations", json::array({{{"key", "node.kubernetes.io/not-ready"},
                                   {"operator", "Exists"},
                                   {"effect", "NoExecute"},
                                   {"tolerationSeconds", 300}},
                                  {{"key", "node.kubernetes.io/unreachable"},
                                   {"operator", "Exists"},
                                   {"effect", "NoExecute"},
                                   {"tolerationSeconds", 300}}}));
  def("priority", 0);
  def("enableServiceLinks", true);
  def("preemptionPolicy", "PreemptLowerPriority");
  json& status = pod["status"];
  if (!status.is_object()) status = json::object();
  if (!status.contains("phase")) status["phase"] = "Pending";
  if (!status.contains("qosClass")) {
    status["qosClass"] = !has_resources ? "BestEffort" : guaranteed ? "Guaranteed" : "Burstable";
  }
}

std::vector<StatusCause> ValidatePod(const json& pod) {
  std::vector<StatusCause> causes;
  const json& spec = pod.contains("spec") ? pod["spec"] : json();
  if (!spec.is_object() || !spec.contains("containers") || !spec["containers"].is_array() ||
      spec["containers"].empty()) {
    causes.push_back({"FieldValueRequired", "Required value", "spec.containers"});
    return causes;
  }
  std::set<std::string> names;
  for (size_t i = 0; i < spec["containers"].size(); ++i) {
    const json& c = spec["containers"][i];
    std::string name = c.is_object() ? c.value("name", std::string()) : "";
    std::string field = absl::StrCat("spec.containers[", i, "].name");
    if (name.empty()) {
      causes.push_back({"FieldValueRequired", "Required value", field});
    } else if (!IsDns1123Label(name)) {
      causes.push_back(InvalidValue(field, Quote(name), kDns1123Label));
    } else if (!names.insert(name).second) {
      causes.push_back(
          {"FieldValueDuplicate", absl::StrCat("Duplicate value: ", Quote(name)), field});
    }
    if (c.is_object() && c.value("image", std::string()).empty()) {
      causes.push_back(
          {"FieldValueRequired", "Required value", absl::StrCat("spec.containers[", i, "].image")});
    }
  }
  return causes;
}

// Pod spec fields a PUT may change.
json PodSpecMutablesCleared(json spec) {
  if (!spec.is_object()) return spec;
  for (const char* list : {"containers", "initContainers"}) {
    if (spec.contains(list) && spec[list].is_array()) {
      for (json& c : spec[list]) {
        if (c.is_object()) c.erase("image");
      }
    }
  }
  spec.erase("activeDeadlineSeconds");
  spec.erase("tolerations");
  return spec;
}

void DefaultService(json& svc, int* next_ip) {
  json& spec = svc["spec"];
  if (!spec.is_object()) spec = json::object();
  if (spec.contains("ports") && spec["ports"].is_array()) {
    for (json& p : spec["ports"]) {
      if (!p.is_object()) continue;
      if (!p.contains("protocol")) p["protocol"] = "TCP";
      if (!p.contains("targetPort") && p.contains("port")) p["targetPort"] = p["port"];
    }
  }
  if (!spec.contains("type")) spec["type"] = "ClusterIP";
  if (!spec.contains("clusterIP") || spec["clusterIP"] == "") {
    int n = (*next_ip)++;
    spec["clusterIP"] = absl::StrCat("10.96.", n / 250, ".", n % 250 + 1);
  }
  if (!spec.contains("clusterIPs")) spec["clusterIPs"] = json::array({spec["clusterIP"]});
  if (!spec.contains("sessionAffinity")) spec["sessionAffinity"] = "None";
  if (!svc.contains("status")) svc["status"] = {{"loadBalancer", json::object()}};
}

// Lease MicroTime: RFC 3339 with exactly six fractional digits; normalised to UTC "Z".
std::string CheckMicroTime(json& spec, const char* field) {
  if (!spec.contains(field) || spec[field].is_null()) return "";
  std::string v = spec[field].is_string() ? spec[field].get<std::string>() : spec[field].dump();
  std::string prefix = absl::StrCat(
      "Lease in version \"v1\" cannot be handled as a Lease: ", "v1.Lease.Spec: v1.LeaseSpec.",
      std::string(1, static_cast<char>(std::toupper(field[0]))), field + 1,
      ": unmarshalerDecoder: parsing time ", Quote(v),
      " as \"2006-01-02T15:04:05.000000Z07:00\": ");
  absl::Time t;
  std::string err;
  bool shape = v.size() >= 26 && v[19] == '.' &&
               std::all_of(v.begin() + 20, v.begin() + 26, ::isdigit) &&
               (v.substr(26) == "Z" || (v.size() == 32 && (v[26] == '+' || v[26] == '-')));
  if (!shape ||
      !absl::ParseTime("%Y-%m-%d%ET%H:%M:%E*S%Ez",
                       v.size() > 26 && v[26] == 'Z' ? absl::StrCat(v.substr(0, 26), "+00:00") : v,
                       &t, &err)) {
    return absl::StrCat(prefix, "cannot parse ", Quote(v.size() > 19 ? v.substr(19) : v),
                        " as \".000000\"");
  }
  spec[field] = absl::FormatTime("%Y-%m-%d%ET%H:%M:%E6SZ", t, absl::UTCTimeZone());
  return "";
}

}  // namespace

// ---------------------------------------------------------------------------

std::string ResourceType::ApiVersion() const {
  return group.empty() ? version : absl::StrCat(group, "/", version);
}
std::string ResourceType::GroupResource() const {
  return group.empty() ? plural : absl::StrCat(plural, ".", group);
}
std::string ResourceType::GroupKind() const {
  return group.empty() ? kind : absl::StrCat(kind, ".", group);
}

const std::vector<ResourceType>& ServedResources() {
  static const auto* resources = new std::vector<ResourceType>{
      {.group = "",
       .version = "v1",
       .plural = "pods",
       .kind = "Pod",
       .has_status = true,
       .delete_returns_object = true},
      {.group = "",
       .version = "v1",
       .plural = "services",
       .kind = "Service",
       .has_status = true,
       .delete_returns_object = true},
      {.group = "", .version = "v1", .plural = "events", .kind = "Event"},
      {.group = "", .version = "v1", .plural = "secrets", .kind = "Secret"},
      {.group = "", .version = "v1", .plural = "configmaps", .kind = "ConfigMap"},
      {.group = "",
       .version = "v1",
       .plural = "namespaces",
       .kind = "Namespace",
       .namespaced = false,
       .has_status = true,
       .delete_returns_object = true},
      {.group = "coordination.k8s.io",
       .version = "v1",
       .plural = "leases",
       .kind = "Lease",
       .rv_required = true},
      // Their webhooks are called on writes they match (kube_emulator_admission.h).
      {.group = "admissionregistration.k8s.io",
       .version = "v1",
       .plural = "validatingwebhookconfigurations",
       .kind = "ValidatingWebhookConfiguration",
       .namespaced = false},
      {.group = "kubetrain.io",
       .version = "v1alpha1",
       .plural = "trainingjobs",
       .kind = "TrainingJob",
       .custom = true,
       .has_status = true,
       .rv_required = true},
      {.group = "scheduling.volcano.sh",
       .version = "v1beta1",
       .plural = "podgroups",
       .kind = "PodGroup",
       .custom = true,
       .has_status = false,  // as Volcano's CRD: no status subresource
       .rv_required = true},
      // Registered by a node agent (tools/node_agent/) when one plays the kubelet.
      {.group = "",
       .version = "v1",
       .plural = "nodes",
       .kind = "Node",
       .namespaced = false,
       .has_status = true,
       .delete_returns_object = true},
  };
  return *resources;
}

OrderedJson StatusBody(int code, const std::string& reason, const std::string& message,
                       const std::optional<StatusDetails>& details) {
  OrderedJson s = OrderedJson::object();
  s["kind"] = "Status";
  s["apiVersion"] = "v1";
  s["metadata"] = OrderedJson::object();
  s["status"] = code >= 200 && code < 300 ? "Success" : "Failure";
  if (!message.empty()) s["message"] = message;
  if (!reason.empty()) s["reason"] = reason;
  if (details.has_value()) {
    OrderedJson d = OrderedJson::object();
    if (!details->name.empty()) d["name"] = details->name;
    if (!details->group.empty()) d["group"] = details->group;
    if (!details->kind.empty()) d["kind"] = details->kind;
    if (!details->uid.empty()) d["uid"] = details->uid;
    if (!details->causes.empty()) {
      OrderedJson causes = OrderedJson::array();
      for (const StatusCause& c : details->causes) {
        OrderedJson cj = OrderedJson::object();
        if (!c.reason.empty()) cj["reason"] = c.reason;
        if (!c.message.empty()) cj["message"] = c.message;
        if (!c.field.empty()) cj["field"] = c.field;
        causes.push_back(cj);
      }
      d["causes"] = causes;
    }
    if (details->retry_after_seconds > 0) d["retryAfterSeconds"] = details->retry_after_seconds;
    s["details"] = d;
  }
  if (code < 200 || code >= 300) s["code"] = code;
  return s;
}

ApiResult StatusResult(int code, const std::string& reason, const std::string& message,
                       const std::optional<StatusDetails>& details) {
  ApiResult r;
  r.code = code;
  r.body = StatusBody(code, reason, message, details);
  if (details.has_value() && details->retry_after_seconds > 0) {
    r.headers.emplace_back("Retry-After", std::to_string(details->retry_after_seconds));
  }
  return r;
}

// ---------------------------------------------------------------------------

const StructuralSchema* EmulatorStore::SchemaFor(const ResourceType& rt) const {
  for (const StructuralSchema& s : options_.schemas) {
    if (s.group() == rt.group && s.plural() == rt.plural) return &s;
  }
  return nullptr;
}

EmulatorStore::EmulatorStore(const Options& options) : options_(options) {
  {
    absl::MutexLock lock(&mu_);
    const ResourceType& ns_rt = ServedResources()[5];
    // The namespaces kube-apiserver makes at start (kube-node-lease holds the nodes' Leases).
    for (const char* name : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
      json ns = {{"apiVersion", "v1"},
                 {"kind", "Namespace"},
                 {"metadata", {{"name", name}}},
                 {"spec", {{"finalizers", {"kubernetes"}}}},
                 {"status", {{"phase", "Active"}}}};
      (*Meta(ns))["uid"] = NewUid();
      (*Meta(ns))["creationTimestamp"] = NowRfc3339();
      sa_tokens_[name] = absl::StrCat("default-token-", RandomSuffix());
      CommitLocked(ns_rt, name, ns, {}, true);
    }
  }
  gc_thread_ = std::thread([this] { GcLoop(); });
}

EmulatorStore::~EmulatorStore() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (Watcher* w : watchers_) w->closed = true;
  }
  gc_thread_.join();
}

EmulatorStore::Bucket& EmulatorStore::BucketLocked(const ResourceType& rt) {
  return buckets_[rt.GroupResource()];
}

int64_t EmulatorStore::ResourceVersion() const {
  absl::MutexLock lock(&mu_);
  return rv_;
}

int64_t EmulatorStore::LastRvLocked(const ResourceType& rt) const {
  auto it = last_rv_.find(rt.GroupResource());
  return it == last_rv_.end() ? rv_ : it->second;
}

void EmulatorStore::Compact() {
  absl::MutexLock lock(&mu_);
  compacted_rv_ = rv_ + 1;
  log_.clear();
}

bool EmulatorStore::NamespaceActiveLocked(const std::string& ns, ApiResult* error,
                                          const ResourceType& rt, const std::string& name) {
  const Bucket& b = buckets_["namespaces"];
  auto it = b.find(ns);
  if (it == b.end()) {
    StatusDetails d;
    d.name = ns;
    d.kind = "namespaces";
    *error = StatusResult(404, "NotFound", absl::StrCat("namespaces ", Quote(ns), " not found"), d);
    return false;
  }
  if (it->second.obj["metadata"].contains("deletionTimestamp")) {
    StatusDetails d = Details(rt, name);
    d.causes.push_back({"NamespaceTerminating",
                        absl::StrCat("namespace ", ns, " is being terminated"),
                        "metadata.namespace"});
    *error = StatusResult(403, "Forbidden",
                          absl::StrCat(rt.GroupResource(), " ", Quote(name),
                                       " is forbidden: unable to create new content in "
                                       "namespace ",
                                       ns, " because it is being terminated"),
                          d);
    return false;
  }
  return true;
}

void EmulatorStore::EmitLocked(const ResourceType& rt, const std::string& type, const json& obj,
                               const json& old_obj) {
  LoggedEvent ev{.rv = rv_, .rt = &rt, .type = type, .object = obj, .old_object = old_obj};
  last_rv_[rt.GroupResource()] = rv_;
  const std::string uid = StrField(obj, "metadata", "uid");
  if (type == "ADDED") live_uids_.insert(uid);
  if (type == "DELETED") live_uids_.erase(uid);
  // Only deletions, objects being deleted and objects whose owners are not
  // (known to be) present give the collector work.
  static const json kNoMetadata = json::object();
  auto meta_it = obj.find("metadata");
  const json& meta = meta_it != obj.end() && meta_it->is_object() ? *meta_it : kNoMetadata;
  bool gc_work = type == "DELETED" || meta.contains("deletionTimestamp");
  if (!gc_work && meta.contains("ownerReferences") && meta["ownerReferences"].is_array()) {
    for (const json& ref : meta["ownerReferences"]) {
      if (!ref.is_object() || !live_uids_.count(ref.value("uid", std::string()))) gc_work = true;
    }
  }
  if (gc_work) gc_dirty_ = true;
  for (Watcher* w : watchers_) {
    if (w->closed || w->end_after_queue || w->rt != &rt) continue;
    if (!w->ns.empty() && StrField(obj, "metadata", "namespace") != w->ns) continue;
    if (ev.rv <= w->min_rv) continue;
    bool now = Selected(rt, obj, w->options);
    bool before = type == "MODIFIED" && Selected(rt, old_obj, w->options);
    if (type == "ADDED" && now) {
      w->queue.push_back({"ADDED", Present(rt, obj)});
    } else if (type == "DELETED" && now) {
      w->queue.push_back({"DELETED", Present(rt, obj)});
    } else if (type == "MODIFIED") {
      if (now && before) {
        w->queue.push_back({"MODIFIED", Present(rt, obj)});
      } else if (now) {
        w->queue.push_back({"ADDED", Present(rt, obj)});
      } else if (before) {
        json gone = old_obj;
        (*Meta(gone))["resourceVersion"] = std::to_string(rv_);
        w->queue.push_back({"DELETED", Present(rt, gone)});
      }
    }
  }
  log_.push_back(std::move(ev));
  while (static_cast<int>(log_.size()) > std::max(1, options_.watch_window)) {
    compacted_rv_ = std::max(compacted_rv_, log_.front().rv);
    log_.pop_front();
  }
}

json EmulatorStore::CommitLocked(const ResourceType& rt, const std::string& key, json obj,
                                 std::set<std::string> owned, bool created) {
  Bucket& b = BucketLocked(rt);
  json old = created ? json() : b[key].obj;
  ++rv_;
  (*Meta(obj))["resourceVersion"] = std::to_string(rv_);
  obj["apiVersion"] = rt.ApiVersion();
  obj["kind"] = rt.kind;
  b[key] = Stored{obj, std::move(owned)};
  EmitLocked(rt, created ? "ADDED" : "MODIFIED", obj, old);
  return obj;
}

void EmulatorStore::RemoveLocked(const ResourceType& rt, const std::string& key) {
  Bucket& b = BucketLocked(rt);
  auto it = b.find(key);
  if (it == b.end()) return;
  json obj = std::move(it->second.obj);
  b.erase(it);
  ++rv_;
  (*Meta(obj))["resourceVersion"] = std::to_string(rv_);
  EmitLocked(rt, "DELETED", obj, json());
}

bool EmulatorStore::UidExistsLocked(const std::string& uid) const {
  for (const auto& [name, bucket] : buckets_) {
    for (const auto& [key, stored] : bucket) {
      if (StrField(stored.obj, "metadata", "uid") == uid) return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------
// Create

namespace {

// Common decoding of a request body: 400/500 as the apiserver answers them.
std::optional<ApiResult> DecodeObject(const ResourceType& rt, const std::string& body, json* out) {
  json obj = json::parse(body, nullptr, false);
  if (obj.is_discarded() || !obj.is_object()) {
    std::string head = body.substr(0, 30);
    return BadRequest(absl::StrCat(
        "the object provided is unrecognized (must be of type ", rt.kind,
        "): couldn't get version/kind; json parse error: ",
        obj.is_discarded() ? "unexpected end of JSON input" : "cannot unmarshal into object", " (",
        head, " ...)"));
  }
  std::string api_version = obj.value("apiVersion", std::string());
  std::string kind = obj.value("kind", std::string());
  if (rt.custom) {
    if (api_version.empty()) {
      StatusDetails d;
      d.causes.push_back(
          {"", "Object 'apiVersion' is missing in 'object has no apiVersion field'", ""});
      return StatusResult(500, "InternalError",
                          "Internal error occurred: Object 'apiVersion' is missing in 'object has "
                          "no apiVersion field'",
                          d);
    }
  }
  if (!api_version.empty() && api_version != rt.ApiVersion()) {
    return BadRequest(absl::StrCat("the API version in the data (", api_version,
                                   ") does not match the expected API version (", rt.ApiVersion(),
                                   ")"));
  }
  if (!kind.empty() && kind != rt.kind) {
    if (rt.custom) {
      std::string name = StrField(obj, "metadata", "name");
      StatusDetails d;
      d.name = name;
      d.group = rt.group;
      d.kind = kind;
      std::string msg = absl::StrCat("Invalid value: ", Quote(kind), ": must be ", rt.kind);
      d.causes.push_back({"FieldValueInvalid", msg, "kind"});
      return StatusResult(
          422, "Invalid",
          absl::StrCat(kind, ".", rt.group, " ", Quote(name), " is invalid: kind: ", msg), d);
    }
    return BadRequest(absl::StrCat(
        kind, " in version ", Quote(rt.version), " cannot be handled as a ", rt.kind,
        ": converting (", rt.version, ".", kind, ") to (core.", rt.kind, "): unknown conversion"));
  }
  if (obj.contains("metadata") && !obj["metadata"].is_object()) obj["metadata"] = json::object();
  *out = std::move(obj);
  return std::nullopt;
}

// Validation common to create and update, plus kind-specific checks.
std::vector<StatusCause> ValidateObject(const ResourceType& rt, const StructuralSchema* schema,
                                        json& obj, std::string* bad_request) {
  std::vector<StatusCause> causes;
  const json& meta = obj["metadata"];
  if (meta.contains("labels") && meta["labels"].is_object()) {
    for (const auto& [k, v] : meta["labels"].items()) {
      if (std::string e = kube::ValidateLabelKey(k); !e.empty()) {
        causes.push_back(InvalidValue("metadata.labels", Quote(k), e));
      }
      std::string value = v.is_string() ? v.get<std::string>() : v.dump();
      if (std::string e = kube::ValidateLabelValue(value); !e.empty()) {
        causes.push_back(InvalidValue("metadata.labels", Quote(value), e));
      }
    }
  }
  if (rt.plural == "pods") {
    for (StatusCause& c : ValidatePod(obj)) causes.push_back(std::move(c));
  } else if (rt.plural == "services") {
    const json& spec = obj["spec"];
    bool headless = spec.value("clusterIP", std::string()) == "None";
    if (!headless &&
        (!spec.contains("ports") || !spec["ports"].is_array() || spec["ports"].empty())) {
      causes.push_back({"FieldValueRequired", "Required value", "spec.ports"});
    }
  } else if (rt.plural == "events") {
    std::string ns = StrField(obj, "metadata", "namespace");
    std::string ins = StrField(obj, "involvedObject", "namespace");
    if (!ins.empty() && ins != ns) {
      causes.push_back(
          InvalidValue("involvedObject.namespace", Quote(ins), "does not match event.namespace"));
    }
  } else if (rt.plural == "leases") {
    json& spec = obj["spec"];
    if (spec.is_object()) {
      for (const char* f : {"acquireTime", "renewTime"}) {
        if (std::string e = CheckMicroTime(spec, f); !e.empty()) {
          *bad_request = e;
          return {};
        }
      }
      if (spec.contains("leaseDurationSeconds") && spec["leaseDurationSeconds"].is_number() &&
          spec["leaseDurationSeconds"].get<int64_t>() <= 0) {
        causes.push_back(InvalidValue("spec.leaseDurationSeconds",
                                      spec["leaseDurationSeconds"].dump(),
                                      "must be greater than 0"));
      }
    }
  }
  if (schema != nullptr) {
    for (SchemaViolation& v : schema->Validate(obj)) {
      causes.push_back({std::move(v.reason), std::move(v.message), std::move(v.field)});
    }
  }
  return causes;
}

// Structural pruning and defaulting with the resource's schema; without one,
// only the top-level fields of any custom resource are kept.
void PruneCustom(const StructuralSchema* schema, json& obj) {
  if (schema != nullptr) {
    schema->PruneAndDefault(obj);
    return;
  }
  for (auto it = obj.begin(); it != obj.end();) {
    const std::string& k = it.key();
    if (k != "apiVersion" && k != "kind" && k != "metadata" && k != "spec" && k != "status") {
      it = obj.erase(it);
    } else {
      ++it;
    }
  }
}

void ApplyKindDefaults(const ResourceType& rt, json& obj, const std::string& token, int* next_ip) {
  if (rt.plural == "pods") {
    DefaultPod(obj, token);
  } else if (rt.plural == "services") {
    DefaultService(obj, next_ip);
  } else if (rt.plural == "events") {
    for (const char* k : {"firstTimestamp", "lastTimestamp", "eventTime"}) {
      if (!obj.contains(k)) obj[k] = nullptr;
    }
    if (!obj.contains("source")) obj["source"] = json::object();
    if (!obj.contains("reportingComponent")) obj["reportingComponent"] = "";
    if (!obj.contains("reportingInstance")) obj["reportingInstance"] = "";
    for (const char* k : {"firstTimestamp", "lastTimestamp"}) {
      if (obj[k].is_string() && obj[k].get<std::string>().size() > 20) {
        obj[k] = absl::StrCat(obj[k].get<std::string>().substr(0, 19), "Z");
      }
    }
  } else if (rt.plural == "secrets") {
    if (!obj.contains("type")) obj["type"] = "Opaque";
    if (obj.contains("stringData") && obj["stringData"].is_object()) {
      for (const auto& [k, v] : obj["stringData"].items()) {
        obj["data"][k] = absl::Base64Escape(v.is_string() ? v.get<std::string>() : v.dump());
      }
      obj.erase("stringData");
    }
  } else if (rt.plural == "namespaces") {
    if (!obj.contains("spec") || !obj["spec"].is_object()) obj["spec"] = json::object();
    if (!obj["spec"].contains("finalizers")) obj["spec"]["finalizers"] = {"kubernetes"};
    if (!obj.contains("status") || !obj["status"].is_object()) obj["status"] = json::object();
    if (!obj["status"].contains("phase")) obj["status"]["phase"] = "Active";
  }
}

}  // namespace

ApiResult EmulatorStore::Create(const ResourceType& rt, const std::string& ns,
                                const std::string& body, bool dry_run) {
  json obj;
  if (auto err = DecodeObject(rt, body, &obj)) return *err;
  absl::MutexLock lock(&mu_);
  return CreateLocked(rt, ns, std::move(obj), dry_run);
}

ApiResult EmulatorStore::CreateLocked(const ResourceType& rt, const std::string& ns, json obj,
                                      bool dry_run) {
  std::set<std::string> owned = OwnedPaths(obj);
  json& meta = *Meta(obj);
  std::string body_ns = meta.value("namespace", std::string());
  if (rt.namespaced && !body_ns.empty() && body_ns != ns) {
    return BadRequest(
        "the namespace of the provided object does not match the namespace sent on the request");
  }
  std::string name = meta.value("name", std::string());
  std::string generate = meta.value("generateName", std::string());
  if (rt.namespaced) {
    ApiResult err;
    if (!NamespaceActiveLocked(ns, &err, rt, name.empty() ? generate : name)) return err;
    meta["namespace"] = ns;
  } else {
    meta.erase("namespace");
  }
  if (meta.contains("resourceVersion") && meta["resourceVersion"] != "") {
    return InternalNoReason("resourceVersion should not be set on objects to be created");
  }
  if (name.empty() && generate.empty()) {
    return Invalid(rt, "",
                   {{"FieldValueRequired", "Required value: name or generateName is required",
                     "metadata.name"}});
  }
  Bucket& bucket = BucketLocked(rt);
  if (name.empty()) {
    do {
      name = absl::StrCat(generate, RandomSuffix());
    } while (bucket.count(KeyOf(rt.namespaced ? ns : "", name)));
    meta["name"] = name;
  }
  bool name_ok = rt.plural == "namespaces" ? IsDns1123Label(name)
                 : rt.plural == "services" ? IsDns1123Label(name) && std::isalpha(name[0])
                                           : IsDns1123Subdomain(name);
  if (!name_ok) {
    const char* msg = rt.plural == "namespaces" ? kDns1123Label
                      : rt.plural == "services" ? kDns1035Label
                                                : kDns1123Subdomain;
    return Invalid(rt, name, {InvalidValue("metadata.name", Quote(name), msg)});
  }
  for (const char* k :
       {"uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
        "managedFields", "selfLink", "generation", "resourceVersion"}) {
    meta.erase(k);
  }
  if (rt.custom) PruneCustom(SchemaFor(rt), obj);
  if (rt.has_status) obj.erase("status");
  if (rt.plural == "namespaces" && !sa_tokens_.count(name)) {
    sa_tokens_[name] = absl::StrCat("default-token-", RandomSuffix());
  }
  std::string token = rt.plural == "pods" ? sa_tokens_[ns] : "";
  ApplyKindDefaults(rt, obj, token, &next_cluster_ip_);
  std::string bad_request;
  std::vector<StatusCause> causes = ValidateObject(rt, SchemaFor(rt), obj, &bad_request);
  if (!bad_request.empty()) return BadRequest(bad_request);
  if (!causes.empty()) return Invalid(rt, name, causes);
  std::string key = KeyOf(rt.namespaced ? ns : "", name);
  if (bucket.count(key)) {
    return StatusResult(409, "AlreadyExists",
                        absl::StrCat(rt.GroupResource(), " ", Quote(name), " already exists"),
                        Details(rt, name));
  }
  json& m = *Meta(obj);
  m["uid"] = NewUid();
  m["creationTimestamp"] = NowRfc3339();
  if (rt.custom) m["generation"] = 1;
  obj["apiVersion"] = rt.ApiVersion();
  obj["kind"] = rt.kind;
  if (std::optional<ApiResult> refused = AdmitLocked(rt, "", "CREATE", ns, name, obj, json())) {
    return *refused;
  }
  ApiResult r;
  r.code = 201;
  if (dry_run) {
    r.body = Present(rt, obj);
    return r;
  }
  r.body = Present(rt, CommitLocked(rt, key, std::move(obj), std::move(owned), true));
  return r;
}

// ---------------------------------------------------------------------------
// Get / List

ApiResult EmulatorStore::Get(const ResourceType& rt, const std::string& ns,
                             const std::string& name) {
  absl::MutexLock lock(&mu_);
  const Bucket& b = BucketLocked(rt);
  auto it = b.find(KeyOf(rt.namespaced ? ns : "", name));
  if (it == b.end()) return NotFound(rt, name);
  ApiResult r;
  r.body = Present(rt, it->second.obj);
  return r;
}

ApiResult EmulatorStore::Bind(const std::string& ns, const std::string& name,
                              const std::string& body) {
  const ResourceType& rt = ServedResources()[0];  // pods
  json binding = json::parse(body, nullptr, false);
  if (binding.is_discarded() || !binding.is_object()) {
    return BadRequest("the body of the request could not be decoded");
  }
  const std::string node = StrField(binding, "target", "name");
  if (node.empty()) {
    return StatusResult(422, "Invalid",
                        absl::StrCat("Binding.core \"", name,
                                     "\" is invalid: target.name: "
                                     "Required value"),
                        std::nullopt);
  }
  absl::MutexLock lock(&mu_);
  Bucket& bucket = BucketLocked(rt);
  const std::string key = KeyOf(ns, name);
  auto it = bucket.find(key);
  if (it == bucket.end()) return NotFound(rt, name);
  json obj = it->second.obj;
  const std::string uid = StrField(binding, "metadata", "uid");
  const std::string assigned = StrField(obj, "spec", "nodeName");
  StatusDetails details;
  details.name = name;
  details.kind = "pods/binding";
  if (!uid.empty() && uid != StrField(obj, "metadata", "uid")) {
    return StatusResult(409, "Conflict",
                        absl::StrCat("Operation cannot be fulfilled on pods/binding \"", name,
                                     "\": Precondition failed: UID in precondition: ", uid),
                        details);
  }
  if (!assigned.empty() || obj["metadata"].contains("deletionTimestamp")) {
    return StatusResult(
        409, "Conflict",
        absl::StrCat(
            "Operation cannot be fulfilled on pods/binding \"", name, "\": ",
            assigned.empty()
                ? absl::StrCat("pod ", name, " is being deleted")
                : absl::StrCat("pod ", name, " is already assigned to node \"", assigned, "\"")),
        details);
  }
  obj["spec"]["nodeName"] = node;
  std::set<std::string> owned = it->second.owned;
  CommitLocked(rt, key, std::move(obj), std::move(owned), false);
  ApiResult r = StatusResult(201, "", "", std::nullopt);
  r.code = 201;
  r.body["code"] = 201;
  return r;
}

ApiResult EmulatorStore::List(const ResourceType& rt, const std::string& ns, const ListOptions& o) {
  for (const FieldRequirement& f : o.fields) {
    if (!FieldSupported(rt, f.field)) {
      return BadRequest(absl::StrCat("field label not supported: ", f.field));
    }
  }
  absl::MutexLock lock(&mu_);
  int64_t requested_rv = 0;
  if (!o.resource_version.empty() && !ParseRv(o.resource_version, &requested_rv)) {
    return InternalNoReason(absl::StrCat(
        "resourceVersion: Invalid value: ", Quote(o.resource_version),
        ": strconv.ParseUint: parsing ", Quote(o.resource_version), ": invalid syntax"));
  }
  int64_t list_rv = rv_;
  std::string start;
  if (!o.continue_token.empty()) {
    if (!o.resource_version.empty() && o.resource_version != "0") {
      return BadRequest("specifying resource version is not allowed when using continue");
    }
    std::string decoded;
    json token;
    if (!absl::WebSafeBase64Unescape(o.continue_token, &decoded)) {
      return BadRequest("invalid continue token: continue key is not valid: illegal base64 data");
    }
    token = json::parse(decoded, nullptr, false);
    if (token.is_discarded() || !token.is_object() || !token.contains("rv") ||
        !token.contains("start")) {
      std::string shown;
      unsigned char c = decoded.empty() ? ' ' : static_cast<unsigned char>(decoded[0]);
      if (c >= 0x20 && c < 0x7f) {
        shown = std::string(1, static_cast<char>(c));
      } else {
        shown = absl::StrFormat("\\u%04x", c);
      }
      return BadRequest(
          absl::StrCat("invalid continue token: continue key is not valid: invalid "
                       "character '",
                       shown, "' looking for beginning of value"));
    }
    list_rv = token["rv"].get<int64_t>();
    start = token["start"].get<std::string>();
    if (!start.empty() && start.back() == '\0') start.pop_back();
    if (list_rv < compacted_rv_) {
      ApiResult r = StatusResult(
          410, "Expired",
          "The provided continue parameter is too old to display a consistent list result. You "
          "can start a new list without the continue parameter, or use the continue token in "
          "this response to retrieve the remainder of the results. Continuing with the provided "
          "token results in an inconsistent list - objects that were created, modified, or "
          "deleted between the time the first chunk was returned and now may show up in the "
          "list.",
          std::nullopt);
      r.body["metadata"] = OrderedJson{{"continue", EncodeContinue(-1, start)}};
      return r;
    }
  } else if (!o.resource_version.empty() && o.resource_version != "0") {
    bool exact = o.resource_version_match == "Exact" || o.limit > 0;
    if (exact && requested_rv < compacted_rv_) {
      return StatusResult(410, "Expired", "The resourceVersion for the provided list is too old.",
                          std::nullopt);
    }
    if (requested_rv > rv_) {
      StatusDetails d;
      d.causes.push_back({"ResourceVersionTooLarge", "Too large resource version", ""});
      d.retry_after_seconds = 1;
      return StatusResult(
          504, "Timeout",
          absl::StrCat("Timeout: Too large resource version: ", requested_rv, ", current: ", rv_),
          d);
    }
  }
  const Bucket& b = BucketLocked(rt);
  std::vector<const json*> items;
  std::vector<std::string> keys;
  for (const auto& [key, stored] : b) {
    if (rt.namespaced && !ns.empty() && StrField(stored.obj, "metadata", "namespace") != ns)
      continue;
    std::string list_key =
        rt.namespaced && ns.empty() ? key : StrField(stored.obj, "metadata", "name");
    if (!start.empty() && list_key <= start) continue;
    if (!Selected(rt, stored.obj, o)) continue;
    items.push_back(&stored.obj);
    keys.push_back(list_key);
  }
  int64_t limit = o.resource_version == "0" ? 0 : o.limit;
  std::string next;
  int64_t remaining = 0;
  if (limit > 0 && static_cast<int64_t>(items.size()) > limit) {
    remaining = static_cast<int64_t>(items.size()) - limit;
    next = EncodeContinue(list_rv, keys[static_cast<size_t>(limit - 1)]);
    items.resize(static_cast<size_t>(limit));
  }
  ApiResult r;
  if (rt.custom) {
    json list = json::object();
    list["apiVersion"] = rt.ApiVersion();
    list["kind"] = absl::StrCat(rt.kind, "List");
    list["metadata"] = {{"continue", next}, {"resourceVersion", std::to_string(list_rv)}};
    if (!next.empty() && !o.has_selector) list["metadata"]["remainingItemCount"] = remaining;
    list["items"] = json::array();
    for (const json* item : items) list["items"].push_back(*item);
    r.body = OrderedCopy(list);
    return r;
  }
  r.body["kind"] = absl::StrCat(rt.kind, "List");
  r.body["apiVersion"] = rt.ApiVersion();
  r.body["metadata"]["resourceVersion"] = std::to_string(list_rv);
  if (!next.empty()) {
    r.body["metadata"]["continue"] = next;
    if (!o.has_selector) r.body["metadata"]["remainingItemCount"] = remaining;
  }
  r.body["items"] = OrderedJson::array();
  for (const json* item : items) r.body["items"].push_back(Present(rt, *item, false));
  return r;
}

// ---------------------------------------------------------------------------
// Update / Patch

std::optional<ApiResult> EmulatorStore::AdmitLocked(const ResourceType& rt,
                                                    const std::string& sub_resource,
                                                    const std::string& operation,
                                                    const std::string& ns, const std::string& name,
                                                    const json& object, const json& old_object) {
  AdmissionInputs in = AdmissionInputsLocked(ns);
  if (in.configurations.empty()) return std::nullopt;
  AdmissionAttributes a;
  a.rt = &rt;
  a.sub_resource = sub_resource;
  a.operation = operation;
  a.ns = ns;
  a.name = name;
  a.kind_group = rt.group;
  a.kind_version = rt.version;
  a.kind = rt.kind;
  a.object = object;
  a.old_object = old_object;
  a.namespace_labels = std::move(in.namespace_labels);
  return RunValidatingWebhooks(in.configurations, a);
}

EmulatorStore::AdmissionInputs EmulatorStore::AdmissionInputsFor(const std::string& ns) {
  absl::MutexLock lock(&mu_);
  return AdmissionInputsLocked(ns);
}

EmulatorStore::AdmissionInputs EmulatorStore::AdmissionInputsLocked(const std::string& ns) {
  // Looked up once: every write asks, and almost always finds no configuration.
  static const auto served = [](const char* plural) {
    for (const ResourceType& rt : ServedResources()) {
      if (rt.plural == plural) return &rt;
    }
    return static_cast<const ResourceType*>(nullptr);
  };
  static const ResourceType* const configurations = served("validatingwebhookconfigurations");
  static const ResourceType* const namespaces = served("namespaces");
  AdmissionInputs in;
  in.configurations = json::array();
  const Bucket& stored = BucketLocked(*configurations);
  if (stored.empty()) return in;
  for (const auto& [key, config] : stored) in.configurations.push_back(config.obj);
  if (ns.empty()) return in;
  const Bucket& nss = BucketLocked(*namespaces);
  if (auto it = nss.find(ns); it != nss.end()) {
    const json meta = it->second.obj.value("metadata", json::object());
    const json labels = meta.is_object() ? meta.value("labels", json::object()) : json();
    if (labels.is_object()) {
      for (const auto& [k, v] : labels.items()) {
        if (v.is_string()) in.namespace_labels[k] = v.get<std::string>();
      }
    }
  }
  return in;
}

ApiResult EmulatorStore::Update(const ResourceType& rt, const std::string& ns,
                                const std::string& name, const std::string& body,
                                bool status_subresource, bool admitted) {
  json obj;
  if (auto err = DecodeObject(rt, body, &obj)) return *err;
  absl::MutexLock lock(&mu_);
  return UpdateLocked(rt, ns, name, std::move(obj), status_subresource, false, admitted);
}

ApiResult EmulatorStore::UpdateLocked(const ResourceType& rt, const std::string& ns,
                                      const std::string& name, json body, bool status_subresource,
                                      bool from_patch, bool admitted) {
  json& meta = *Meta(body);
  std::string body_name = meta.value("name", std::string());
  if (!body_name.empty() && body_name != name) {
    return BadRequest(absl::StrCat("the name of the object (", body_name,
                                   ") does not match the name on the URL (", name, ")"));
  }
  std::string body_ns = meta.value("namespace", std::string());
  if (rt.namespaced && !body_ns.empty() && body_ns != ns) {
    return BadRequest(
        "the namespace of the provided object does not match the namespace sent on the request");
  }
  std::string rv_text = meta.value("resourceVersion", std::string());
  int64_t body_rv = 0;
  if (!rv_text.empty() && !ParseRv(rv_text, &body_rv)) {
    return InternalNoReason(
        absl::StrCat("strconv.ParseUint: parsing ", Quote(rv_text), ": invalid syntax"));
  }
  std::string key = KeyOf(rt.namespaced ? ns : "", name);
  Bucket& bucket = BucketLocked(rt);
  auto it = bucket.find(key);
  std::string body_uid = meta.value("uid", std::string());
  std::string live_uid = it == bucket.end() ? "" : StrField(it->second.obj, "metadata", "uid");
  if (!body_uid.empty() && body_uid != live_uid) {
    std::string storage_key = rt.group.empty()
                                  ? absl::StrCat("/registry/", rt.plural, "/", key)
                                  : absl::StrCat("/registry/", rt.group, "/", rt.plural, "/", key);
    return Conflict(rt, name,
                    absl::StrCat("StorageError: invalid object, Code: 4, Key: ", storage_key,
                                 ", ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: "
                                 "UID in precondition: ",
                                 body_uid, ", UID in object meta: ", live_uid));
  }
  if (it == bucket.end()) return NotFound(rt, name);
  const json& live = it->second.obj;
  if (rv_text.empty() && rt.rv_required && !from_patch) {
    StatusDetails d = Details(rt, name);
    const char* msg = "Invalid value: 0x0: must be specified for an update";
    d.causes.push_back({"FieldValueInvalid", msg, "metadata.resourceVersion"});
    return StatusResult(422, "Invalid",
                        absl::StrCat(rt.GroupResource(), " ", Quote(name),
                                     " is invalid: metadata.resourceVersion: ", msg),
                        d);
  }
  if (!rv_text.empty() && rv_text != StrField(live, "metadata", "resourceVersion")) {
    return Modified(rt, name);
  }
  std::set<std::string> owned = UpdateOwned(it->second.owned, body, live);
  json next;
  if (status_subresource) {
    next = live;
    if (body.contains("status")) {
      next["status"] = body["status"];
    } else {
      next.erase("status");
    }
    if (rt.custom) PruneCustom(SchemaFor(rt), next);
    if (rt.plural == "pods") {
      // v1.20 pods/status keeps the request's labels and annotations (transcript 03).
      for (const char* k : {"labels", "annotations"}) {
        if (meta.contains(k)) {
          next["metadata"][k] = meta[k];
        } else {
          next["metadata"].erase(k);
        }
      }
    }
  } else {
    next = body;
    json& m = *Meta(next);
    const json& lm = live["metadata"];
    for (const char* k : {"uid", "creationTimestamp", "generation", "deletionTimestamp",
                          "deletionGracePeriodSeconds", "namespace", "name", "generateName"}) {
      if (lm.contains(k)) {
        m[k] = lm[k];
      } else {
        m.erase(k);
      }
    }
    m.erase("managedFields");
    m.erase("selfLink");
    if (rt.custom) PruneCustom(SchemaFor(rt), next);
    if (rt.has_status) {
      if (live.contains("status")) {
        next["status"] = live["status"];
      } else {
        next.erase("status");
      }
    }
    std::string token = rt.plural == "pods" ? sa_tokens_[ns] : "";
    if (rt.plural == "pods") {
      DefaultPod(next, "");
    } else if (rt.plural != "services") {
      ApplyKindDefaults(rt, next, token, &next_cluster_ip_);
    }
    if (rt.plural == "services") {
      json& spec = next["spec"];
      const json& lspec = live["spec"];
      if (spec.is_object() && lspec.is_object() && spec.contains("clusterIP") &&
          spec["clusterIP"] != lspec.value("clusterIP", json())) {
        return Invalid(rt, name,
                       {InvalidValue("spec.clusterIPs[0]",
                                     absl::StrCat("[]string{",
                                                  Quote(spec["clusterIP"].get<std::string>()), "}"),
                                     "may not change once set")});
      }
      DefaultService(next, &next_cluster_ip_);
    }
    // Finalizers can only be removed from an object being deleted, not added.
  }
  (*Meta(next))["resourceVersion"] = live["metadata"]["resourceVersion"];
  if (rt.plural == "pods" && next.contains("status") && next["status"].contains("conditions") &&
      next["status"]["conditions"].is_array()) {
    // PodCondition's time fields are always written (null when unset).
    for (json& c : next["status"]["conditions"]) {
      if (!c.is_object()) continue;
      if (!c.contains("lastProbeTime")) c["lastProbeTime"] = nullptr;
      if (!c.contains("lastTransitionTime")) c["lastTransitionTime"] = nullptr;
    }
  }
  std::string bad_request;
  std::vector<StatusCause> causes = ValidateObject(rt, SchemaFor(rt), next, &bad_request);
  if (!bad_request.empty()) return BadRequest(bad_request);
  if (rt.plural == "pods" && causes.empty() &&
      PodSpecMutablesCleared(next["spec"]) != PodSpecMutablesCleared(live["spec"])) {
    causes.push_back({"FieldValueForbidden", kPodUpdateForbidden, "spec"});
  }
  if (!causes.empty()) return Invalid(rt, name, causes);
  // Custom resources: generation counts spec changes, and status changes
  // too when the CRD has no status subresource.
  if (rt.custom &&
      (next.value("spec", json()) != live.value("spec", json()) ||
       (!rt.has_status && next.value("status", json()) != live.value("status", json())))) {
    (*Meta(next))["generation"] = live["metadata"].value("generation", 1) + 1;
  }
  next["apiVersion"] = rt.ApiVersion();
  next["kind"] = rt.kind;
  ApiResult r;
  if (next == live && owned == it->second.owned) {
    r.body = Present(rt, live);
    return r;
  }
  // Admission sees the object as it would be stored (a status write is the
  // status subresource's, which no rule here names).
  if (!status_subresource && !admitted) {
    json proposed = next;
    (*Meta(proposed))["resourceVersion"] = live["metadata"]["resourceVersion"];
    if (std::optional<ApiResult> refused =
            AdmitLocked(rt, "", "UPDATE", ns, name, proposed, live)) {
      return *refused;
    }
  }
  json stored = CommitLocked(rt, key, std::move(next), std::move(owned), false);
  r.body = Present(rt, stored);
  if (MaybeFinishDeletionLocked(rt, key)) {
    // The last finalizer went: the object is gone; answer with its final state.
  }
  return r;
}

ApiResult EmulatorStore::Patch(const ResourceType& rt, const std::string& ns,
                               const std::string& name, const std::string& content_type,
                               const std::string& body, bool status_subresource,
                               const std::string& field_manager) {
  std::string type = content_type.substr(0, content_type.find(';'));
  const char* kCustomMessage =
      "the body of the request was in an unknown format - accepted media types include: "
      "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";
  bool smp = type == "application/strategic-merge-patch+json";
  bool merge = type == "application/merge-patch+json";
  bool jsonpatch = type == "application/json-patch+json";
  bool apply = type == "application/apply-patch+yaml";
  if ((smp && rt.custom) || (!smp && !merge && !jsonpatch && !apply)) {
    if (rt.custom) return StatusResult(415, "UnsupportedMediaType", kCustomMessage, std::nullopt);
    return StatusResult(415, "UnsupportedMediaType", "415: Unsupported Media Type",
                        StatusDetails{});
  }
  if (apply && field_manager.empty()) {
    StatusDetails d;
    d.group = "meta.k8s.io";
    d.kind = "PatchOptions";
    d.causes.push_back(
        {"FieldValueRequired", "Required value: is required for apply patch", "fieldManager"});
    return StatusResult(422, "Invalid",
                        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: "
                        "is required for apply patch",
                        d);
  }
  json patch = json::parse(body, nullptr, false);
  if (patch.is_discarded()) {
    if (merge || apply) return InternalNoReason("Invalid JSON Patch");
    if (smp) return BadRequest("unexpected EOF");
    return BadRequest("unexpected end of JSON input");
  }
  if (jsonpatch && !patch.is_array()) {
    return BadRequest(absl::StrCat("json: cannot unmarshal ", patch.type_name(),
                                   " into Go value of type jsonpatch.Patch"));
  }
  if ((merge || smp || apply) && !patch.is_object()) {
    std::string msg = absl::StrCat(
        "Invalid value: ", Quote(body),
        ": couldn't get version/kind; json parse error: json: cannot unmarshal ", patch.type_name(),
        " into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; "
        "Kind string \"json:\\\"kind,omitempty\\\"\" }");
    StatusDetails d;
    d.causes.push_back({"FieldValueInvalid", msg, "patch"});
    return StatusResult(422, "Invalid", absl::StrCat(" \"\" is invalid: patch: ", msg), d);
  }
  absl::MutexLock lock(&mu_);
  Bucket& bucket = BucketLocked(rt);
  auto it = bucket.find(KeyOf(rt.namespaced ? ns : "", name));
  if (it == bucket.end()) {
    if (apply) {
      json obj = patch;
      (*Meta(obj))["name"] = name;
      return CreateLocked(rt, ns, std::move(obj), false);
    }
    return NotFound(rt, name);
  }
  json current = it->second.obj;
  json patched;
  if (merge || apply) {
    patched = ApplyMergePatch(current, patch);
  } else if (smp) {
    patched = ApplyStrategicMergePatch(current, patch);
  } else {
    absl::StatusOr<json> r = ApplyJsonPatch(current, patch);
    if (!r.ok()) {
      return StatusResult(422, "Invalid",
                          "the server rejected our request due to an error in our request",
                          StatusDetails{});
    }
    patched = *std::move(r);
  }
  if (!patched.is_object()) {
    return StatusResult(422, "Invalid",
                        "the server rejected our request due to an error in our request",
                        StatusDetails{});
  }
  return UpdateLocked(rt, ns, name, std::move(patched), status_subresource, true, false);
}

// ---------------------------------------------------------------------------
// Delete and garbage collection

ApiResult EmulatorStore::Delete(const ResourceType& rt, const std::string& ns,
                                const std::string& name, const DeleteOptions& options) {
  const std::string& p = options.propagation;
  if (!p.empty() && p != "Foreground" && p != "Background" && p != "Orphan") {
    StatusDetails d;
    d.group = "meta.k8s.io";
    d.kind = "DeleteOptions";
    std::string msg = absl::StrCat("Unsupported value: ", Quote(p),
                                   ": supported values: \"Foreground\", \"Background\", "
                                   "\"Orphan\", \"nil\"");
    d.causes.push_back({"FieldValueNotSupported", msg, "propagationPolicy"});
    return StatusResult(422, "Invalid",
                        absl::StrCat("DeleteOptions.meta.k8s.io \"\" is invalid: "
                                     "propagationPolicy: ",
                                     msg),
                        d);
  }
  absl::MutexLock lock(&mu_);
  std::string key = KeyOf(rt.namespaced ? ns : "", name);
  const Bucket& bucket = BucketLocked(rt);
  auto it = bucket.find(key);
  if (it == bucket.end()) return NotFound(rt, name);
  const json& live = it->second.obj;
  auto precondition_failed = [&](const std::string& what) {
    StatusDetails d;
    d.name = name;
    d.group = rt.group;
    d.kind = rt.kind;
    return StatusResult(409, "Conflict",
                        absl::StrCat("Operation cannot be fulfilled on ", rt.GroupKind(), " ",
                                     Quote(name), ": ", what),
                        d);
  };
  std::string uid = StrField(live, "metadata", "uid");
  std::string rv = StrField(live, "metadata", "resourceVersion");
  if (!options.precondition_uid.empty() && options.precondition_uid != uid) {
    return precondition_failed(
        absl::StrCat("the UID in the precondition (", options.precondition_uid,
                     ") does not match the UID in record (", uid,
                     "). The object might have been deleted and then recreated"));
  }
  if (!options.precondition_rv.empty() && options.precondition_rv != rv) {
    return precondition_failed(absl::StrCat("the ResourceVersion in the precondition (",
                                            options.precondition_rv,
                                            ") does not match the ResourceVersion in record (", rv,
                                            "). The object might have been modified"));
  }
  return DeleteLocked(rt, key, options);
}

ApiResult EmulatorStore::DeleteLocked(const ResourceType& rt, const std::string& key,
                                      const DeleteOptions& options) {
  Bucket& bucket = BucketLocked(rt);
  json obj = bucket[key].obj;
  std::set<std::string> owned = bucket[key].owned;
  json& meta = *Meta(obj);
  std::string name = meta.value("name", std::string());
  ApiResult r;
  if (rt.plural == "pods") {
    int64_t grace = options.grace_period_seconds.value_or(
        obj["spec"].value("terminationGracePeriodSeconds", int64_t{30}));
    if (StrField(obj, "spec", "nodeName").empty()) grace = 0;
    if (grace < 0) grace = 0;
    if (meta.contains("deletionTimestamp") &&
        meta.value("deletionGracePeriodSeconds", int64_t{0}) <= grace) {
      r.body = Present(rt, obj);
      return r;
    }
    meta["deletionTimestamp"] = NowRfc3339(absl::Seconds(grace));
    meta["deletionGracePeriodSeconds"] = grace;
    json stored = CommitLocked(rt, key, std::move(obj), std::move(owned), false);
    r.body = Present(rt, stored);
    MaybeFinishDeletionLocked(rt, key);
    return r;
  }
  if (rt.plural == "namespaces") {
    if (!meta.contains("deletionTimestamp")) {
      meta["deletionTimestamp"] = NowRfc3339();
      obj["status"]["phase"] = "Terminating";
      obj = CommitLocked(rt, key, std::move(obj), std::move(owned), false);
    }
    r.body = Present(rt, obj);
    return r;
  }
  std::string policy = options.propagation.empty() ? "Background" : options.propagation;
  bool has_finalizers =
      meta.contains("finalizers") && meta["finalizers"].is_array() && !meta["finalizers"].empty();
  if (policy != "Background" || has_finalizers) {
    if (policy != "Background") {
      std::string fin = policy == "Foreground" ? "foregroundDeletion" : "orphan";
      if (!meta.contains("finalizers") || !meta["finalizers"].is_array()) {
        meta["finalizers"] = json::array();
      }
      bool present = false;
      for (const json& f : meta["finalizers"]) present = present || f == fin;
      if (!present) meta["finalizers"].push_back(fin);
    }
    bool first = !meta.contains("deletionTimestamp");
    if (first) {
      meta["deletionTimestamp"] = NowRfc3339();
      meta["deletionGracePeriodSeconds"] = 0;
      if (meta.contains("generation")) meta["generation"] = meta["generation"].get<int64_t>() + 1;
    }
    if (obj != bucket[key].obj)
      obj = CommitLocked(rt, key, std::move(obj), std::move(owned), false);
    r.body = Present(rt, obj);
    return r;
  }
  RemoveLocked(rt, key);
  if (rt.delete_returns_object) {
    r.body = Present(rt, obj);
    return r;
  }
  StatusDetails d = Details(rt, name);
  d.uid = meta.value("uid", std::string());
  r.body = StatusBody(200, "", "", d);
  return r;
}

bool EmulatorStore::MaybeFinishDeletionLocked(const ResourceType& rt, const std::string& key) {
  Bucket& bucket = BucketLocked(rt);
  auto it = bucket.find(key);
  if (it == bucket.end()) return true;
  const json& meta = it->second.obj["metadata"];
  if (!meta.contains("deletionTimestamp")) return false;
  if (meta.contains("finalizers") && meta["finalizers"].is_array() && !meta["finalizers"].empty()) {
    return false;
  }
  if (rt.plural == "namespaces") return false;  // the GC empties it first
  if (rt.plural == "pods" && meta.value("deletionGracePeriodSeconds", int64_t{0}) > 0) return false;
  RemoveLocked(rt, key);
  return true;
}

ApiResult EmulatorStore::DeleteCollection(const ResourceType& rt, const std::string& ns,
                                          const ListOptions& options) {
  ApiResult listed = List(rt, ns, options);
  if (listed.code != 200) return listed;
  absl::MutexLock lock(&mu_);
  for (const OrderedJson& item : listed.body["items"]) {
    std::string name = item["metadata"].value("name", std::string());
    std::string key =
        KeyOf(rt.namespaced ? item["metadata"].value("namespace", std::string()) : "", name);
    if (BucketLocked(rt).count(key)) DeleteLocked(rt, key, DeleteOptions{});
  }
  return listed;
}

bool EmulatorStore::GcPassLocked() {
  bool changed = false;
  const std::vector<ResourceType>& all = ServedResources();
  // Index of live uids.
  std::map<std::string, std::pair<const ResourceType*, std::string>> by_uid;
  for (const ResourceType& rt : all) {
    for (const auto& [key, stored] : BucketLocked(rt)) {
      by_uid[StrField(stored.obj, "metadata", "uid")] = {&rt, key};
    }
  }
  auto dependents_of = [&](const std::string& uid) {
    std::vector<std::pair<const ResourceType*, std::string>> out;
    for (const ResourceType& rt : all) {
      for (const auto& [key, stored] : BucketLocked(rt)) {
        const json& meta = stored.obj["metadata"];
        if (!meta.contains("ownerReferences") || !meta["ownerReferences"].is_array()) continue;
        for (const json& ref : meta["ownerReferences"]) {
          if (ref.is_object() && ref.value("uid", std::string()) == uid) {
            out.emplace_back(&rt, key);
            break;
          }
        }
      }
    }
    return out;
  };
  auto remove_finalizer = [&](const ResourceType& rt, const std::string& key,
                              const std::string& fin) {
    Stored& s = BucketLocked(rt)[key];
    json obj = s.obj;
    json& f = (*Meta(obj))["finalizers"];
    json kept = json::array();
    for (const json& x : f) {
      if (x != fin) kept.push_back(x);
    }
    if (kept.empty()) {
      RemoveLocked(rt, key);
    } else {
      f = kept;
      CommitLocked(rt, key, std::move(obj), s.owned, false);
    }
    changed = true;
  };
  for (const ResourceType& rt : all) {
    std::vector<std::string> keys;
    for (const auto& [key, stored] : BucketLocked(rt)) keys.push_back(key);
    for (const std::string& key : keys) {
      auto it = BucketLocked(rt).find(key);
      if (it == BucketLocked(rt).end()) continue;
      json obj = it->second.obj;
      const json& meta = obj["metadata"];
      std::string uid = meta.value("uid", std::string());
      bool deleting = meta.contains("deletionTimestamp");
      json fins = meta.value("finalizers", json::array());
      auto has_fin = [&](const char* f) {
        return fins.is_array() && std::find(fins.begin(), fins.end(), f) != fins.end();
      };
      if (deleting && rt.plural == "namespaces") {
        std::string ns = meta.value("name", std::string());
        bool empty = true;
        for (const ResourceType& inner : all) {
          if (!inner.namespaced) continue;
          std::vector<std::string> victims;
          for (const auto& [k, s] : BucketLocked(inner)) {
            if (StrField(s.obj, "metadata", "namespace") == ns) victims.push_back(k);
          }
          for (const std::string& k : victims) {
            empty = false;
            const json& vm = BucketLocked(inner)[k].obj["metadata"];
            if (vm.contains("deletionTimestamp") && vm.contains("finalizers") &&
                !vm["finalizers"].empty()) {
              continue;
            }
            DeleteOptions force;
            force.grace_period_seconds = 0;
            DeleteLocked(inner, k, force);
            changed = true;
          }
        }
        if (empty) {
          RemoveLocked(rt, key);
          sa_tokens_.erase(ns);
          changed = true;
        }
        continue;
      }
      if (deleting && has_fin("orphan")) {
        for (const auto& [drt, dkey] : dependents_of(uid)) {
          Stored& s = BucketLocked(*drt)[dkey];
          json dep = s.obj;
          json refs = json::array();
          for (const json& ref : dep["metadata"]["ownerReferences"]) {
            if (ref.value("uid", std::string()) != uid) refs.push_back(ref);
          }
          if (refs.empty()) {
            dep["metadata"].erase("ownerReferences");
          } else {
            dep["metadata"]["ownerReferences"] = refs;
          }
          CommitLocked(*drt, dkey, std::move(dep), s.owned, false);
        }
        remove_finalizer(rt, key, "orphan");
        continue;
      }
      if (deleting && has_fin("foregroundDeletion")) {
        bool blocked = false;
        for (const auto& [drt, dkey] : dependents_of(uid)) {
          const json& dm = BucketLocked(*drt)[dkey].obj["metadata"];
          for (const json& ref : dm["ownerReferences"]) {
            if (ref.value("uid", std::string()) == uid && ref.value("blockOwnerDeletion", false)) {
              blocked = true;
            }
          }
          if (!dm.contains("deletionTimestamp")) {
            DeleteLocked(*drt, dkey, DeleteOptions{});
            changed = true;
          }
        }
        // Dependents deleted at once no longer block; re-check.
        blocked = false;
        for (const auto& [drt, dkey] : dependents_of(uid)) {
          for (const json& ref : BucketLocked(*drt)[dkey].obj["metadata"]["ownerReferences"]) {
            if (ref.value("uid", std::string()) == uid && ref.value("blockOwnerDeletion", false)) {
              blocked = true;
            }
          }
        }
        if (!blocked) remove_finalizer(rt, key, "foregroundDeletion");
        continue;
      }
      if (deleting || !meta.contains("ownerReferences") || !meta["ownerReferences"].is_array() ||
          meta["ownerReferences"].empty()) {
        continue;
      }
      bool any_owner = false;
      for (const json& ref : meta["ownerReferences"]) {
        if (by_uid.count(ref.value("uid", std::string()))) any_owner = true;
      }
      if (!any_owner) {
        DeleteLocked(rt, key, DeleteOptions{});
        changed = true;
      }
    }
  }
  return changed;
}

void EmulatorStore::GcLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return gc_dirty_ || stopping_; };
    mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(200));
    if (stopping_) return;
    gc_dirty_ = false;
    auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    mu_.AwaitWithTimeout(absl::Condition(&stop), options_.gc_delay);
    if (stopping_) return;
    for (int i = 0; i < 20 && GcPassLocked(); ++i) {
    }
    gc_dirty_ = false;
  }
}

// ---------------------------------------------------------------------------
// Watch

std::unique_ptr<EmulatorStore::Watcher> EmulatorStore::Watch(const ResourceType& rt,
                                                             const std::string& ns,
                                                             const ListOptions& o,
                                                             ApiResult* error) {
  for (const FieldRequirement& f : o.fields) {
    if (!FieldSupported(rt, f.field)) {
      *error = BadRequest(absl::StrCat("field label not supported: ", f.field));
      return nullptr;
    }
  }
  absl::MutexLock lock(&mu_);
  int64_t from = 0;
  if (!o.resource_version.empty() && !ParseRv(o.resource_version, &from)) {
    *error = InternalNoReason(absl::StrCat(
        "resourceVersion: Invalid value: ", Quote(o.resource_version),
        ": strconv.ParseUint: parsing ", Quote(o.resource_version), ": invalid syntax"));
    return nullptr;
  }
  auto w = std::make_unique<Watcher>();
  w->rt = &rt;
  w->ns = ns;
  w->options = o;
  bool from_now = o.resource_version.empty() || o.resource_version == "0";
  if (from_now) {
    for (const auto& [key, stored] : BucketLocked(rt)) {
      if (!ns.empty() && StrField(stored.obj, "metadata", "namespace") != ns) continue;
      if (Selected(rt, stored.obj, o)) w->queue.push_back({"ADDED", Present(rt, stored.obj)});
    }
  } else if (from < compacted_rv_) {
    w->queue.push_back({"ERROR", StatusBody(410, "Expired",
                                            absl::StrCat("too old resource version: ", from, " (",
                                                         compacted_rv_, ")"),
                                            std::nullopt)});
    w->end_after_queue = true;
  } else {
    w->min_rv = from;
    // Replay retained events after `from` through the same filter as live ones.
    for (const LoggedEvent& ev : log_) {
      if (ev.rv <= from || ev.rt != &rt) continue;
      // Re-run the filter with the event's own resourceVersion.
      bool now = Selected(rt, ev.object, o);
      bool before = ev.type == "MODIFIED" && Selected(rt, ev.old_object, o);
      if (!ns.empty() && StrField(ev.object, "metadata", "namespace") != ns) continue;
      if (ev.type == "ADDED" && now) w->queue.push_back({"ADDED", Present(rt, ev.object)});
      if (ev.type == "DELETED" && now) w->queue.push_back({"DELETED", Present(rt, ev.object)});
      if (ev.type == "MODIFIED") {
        if (now && before) {
          w->queue.push_back({"MODIFIED", Present(rt, ev.object)});
        } else if (now) {
          w->queue.push_back({"ADDED", Present(rt, ev.object)});
        } else if (before) {
          json gone = ev.old_object;
          (*Meta(gone))["resourceVersion"] = std::to_string(ev.rv);
          w->queue.push_back({"DELETED", Present(rt, gone)});
        }
      }
    }
  }
  watchers_.insert(w.get());
  return w;
}

bool EmulatorStore::NextEvents(Watcher* w, absl::Time deadline, std::vector<WatchEvent>* out) {
  absl::MutexLock lock(&mu_);
  auto ready = [w]() { return !w->queue.empty() || w->closed; };
  mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
  while (!w->queue.empty()) {
    out->push_back(std::move(w->queue.front()));
    w->queue.pop_front();
  }
  if (w->end_after_queue) w->closed = true;
  return !w->closed || !out->empty();
}

WatchEvent EmulatorStore::Bookmark(const ResourceType& rt) {
  absl::MutexLock lock(&mu_);
  std::string rv = std::to_string(LastRvLocked(rt));
  OrderedJson o = OrderedJson::object();
  if (rt.custom) {
    o["apiVersion"] = rt.ApiVersion();
    o["kind"] = rt.kind;
    o["metadata"] = OrderedJson{{"resourceVersion", rv}};
    return {"BOOKMARK", o};
  }
  o["kind"] = rt.kind;
  o["apiVersion"] = rt.ApiVersion();
  o["metadata"] = OrderedJson::object();
  o["metadata"]["resourceVersion"] = rv;
  o["metadata"]["creationTimestamp"] = nullptr;
  if (rt.plural == "pods") {
    o["spec"] = OrderedJson{{"containers", nullptr}};
    o["status"] = OrderedJson::object();
  } else if (rt.plural == "services") {
    o["spec"] = OrderedJson::object();
    o["status"] = OrderedJson{{"loadBalancer", OrderedJson::object()}};
  } else if (rt.plural == "namespaces" || rt.plural == "leases") {
    o["spec"] = OrderedJson::object();
    if (rt.plural == "namespaces") o["status"] = OrderedJson::object();
  } else if (rt.plural == "events") {
    o["involvedObject"] = OrderedJson::object();
    o["source"] = OrderedJson::object();
    o["firstTimestamp"] = nullptr;
    o["lastTimestamp"] = nullptr;
    o["eventTime"] = nullptr;
    o["reportingComponent"] = "";
    o["reportingInstance"] = "";
  }
  return {"BOOKMARK", o};
}

void EmulatorStore::CloseWatcher(Watcher* w) {
  absl::MutexLock lock(&mu_);
  watchers_.erase(w);
}

int EmulatorStore::OpenWatchers() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(watchers_.size());
}

}  // namespace kubetrain::testing
