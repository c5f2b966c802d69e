#include "api/training_job.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "operator/kube/object_names.h"
#include "operator/kube/yaml_json.h"

namespace kubetrain::api {
namespace {

using nlohmann::json;

absl::Status FieldError(const std::string& path, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", problem));
}

std::string Describe(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return v.get<bool>() ? "true" : "false";
    case json::value_t::string:
      return absl::StrCat("\"", v.get<std::string>(), "\"");
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return v.dump();
    case json::value_t::array:
      return "a list";
    case json::value_t::object:
      return "a mapping";
    default:
      return "a value";
  }
}

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

absl::Status CheckObject(const json& v, const std::string& path) {
  if (!v.is_object()) return FieldError(path, absl::StrCat("must be a mapping, got ", Describe(v)));
  return absl::OkStatus();
}

absl::Status CheckKnownFields(const json& obj, const std::string& path,
                              std::initializer_list<const char*> known) {
  for (const auto& [key, value] : obj.items()) {
    if (std::find_if(known.begin(), known.end(), [&](const char* k) { return key == k; }) ==
        known.end()) {
      return FieldError(Join(path, key),
                        absl::StrCat("unknown field (known: ", absl::StrJoin(known, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

// Absent or null fields leave `out` unchanged.
absl::Status GetString(const json& obj, const std::string& key, const std::string& path,
                       std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) {
    return FieldError(Join(path, key), absl::StrCat("must be a string, got ", Describe(*it)));
  }
  *out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status GetBool(const json& obj, const std::string& key, const std::string& path, bool* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) {
    return FieldError(Join(path, key), absl::StrCat("must be true or false, got ", Describe(*it)));
  }
  *out = it->get<bool>();
  return absl::OkStatus();
}

template <typename Int>
absl::Status IntValue(const json& v, const std::string& path, Int* out) {
  if (!v.is_number_integer()) {
    return FieldError(path, absl::StrCat("must be an integer, got ", Describe(v)));
  }
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<Int>::max())) {
      return FieldError(path, absl::StrCat("out of range, got ", u));
    }
    *out = static_cast<Int>(u);
    return absl::OkStatus();
  }
  const int64_t i = v.get<int64_t>();
  if (i < static_cast<int64_t>(std::numeric_limits<Int>::min()) ||
      i > static_cast<int64_t>(std::numeric_limits<Int>::max())) {
    return FieldError(path, absl::StrCat("out of range, got ", i));
  }
  *out = static_cast<Int>(i);
  return absl::OkStatus();
}

template <typename Int>
absl::Status GetOptionalInt(const json& obj, const std::string& key, const std::string& path,
                            std::optional<Int>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  Int v{};
  if (absl::Status s = IntValue(*it, Join(path, key), &v); !s.ok()) return s;
  *out = v;
  return absl::OkStatus();
}

absl::Status GetStringMap(const json& obj, const std::string& key, const std::string& path,
                          std::map<std::string, std::string>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  const std::string p = Join(path, key);
  if (absl::Status s = CheckObject(*it, p); !s.ok()) return s;
  for (const auto& [k, v] : it->items()) {
    if (!v.is_string()) {
      return FieldError(Join(p, k), absl::StrCat("must be a string, got ", Describe(v)));
    }
    (*out)[k] = v.get<std::string>();
  }
  return absl::OkStatus();
}

absl::Status GetStringList(const json& obj, const std::string& key, const std::string& path,
                           std::vector<std::string>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  const std::string p = Join(path, key);
  if (!it->is_array()) return FieldError(p, absl::StrCat("must be a list, got ", Describe(*it)));
  for (size_t i = 0; i < it->size(); ++i) {
    const json& v = (*it)[i];
    if (!v.is_string()) {
      return FieldError(absl::StrCat(p, "[", i, "]"),
                        absl::StrCat("must be a string, got ", Describe(v)));
    }
    out->push_back(v.get<std::string>());
  }
  return absl::OkStatus();
}

template <typename Enum>
absl::Status GetEnum(const json& obj, const std::string& key, const std::string& path,
                     std::optional<Enum> (*parse)(std::string_view), const std::string& choices,
                     std::optional<Enum>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  std::optional<Enum> v;
  if (it->is_string()) v = parse(it->get<std::string>());
  if (!v) {
    return FieldError(Join(path, key),
                      absl::StrCat("must be one of ", choices, ", got ", Describe(*it)));
  }
  *out = v;
  return absl::OkStatus();
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

absl::StatusOr<ReplicaSpec> ReplicaSpecFromJson(const json& v, const std::string& path) {
  if (absl::Status s = CheckObject(v, path); !s.ok()) return s;
  if (absl::Status s = CheckKnownFields(v, path, {"replicas", "restartPolicy", "template"});
      !s.ok()) {
    return s;
  }
  ReplicaSpec spec;
  if (absl::Status s = GetOptionalInt(v, "replicas", path, &spec.replicas); !s.ok()) return s;
  if (absl::Status s =
          GetEnum<RestartPolicy>(v, "restartPolicy", path, &ParseRestartPolicy,
                                 "Always, OnFailure, Never, ExitCode", &spec.restart_policy);
      !s.ok()) {
    return s;
  }
  if (auto it = v.find("template"); it != v.end() && !it->is_null()) {
    if (absl::Status s = CheckObject(*it, Join(path, "template")); !s.ok()) return s;
    spec.pod_template = *it;
  }
  return spec;
}

absl::Status RunPolicyFromJson(const json& v, const std::string& path, RunPolicy* rp) {
  if (absl::Status s = CheckObject(v, path); !s.ok()) return s;
  if (absl::Status s = CheckKnownFields(v, path,
                                        {"cleanPodPolicy", "backoffLimit", "activeDeadlineSeconds",
                                         "ttlSecondsAfterFinished", "suspend", "schedulingPolicy"});
      !s.ok()) {
    return s;
  }
  if (absl::Status s = GetEnum<CleanPodPolicy>(v, "cleanPodPolicy", path, &ParseCleanPodPolicy,
                                               "Running, All, None", &rp->clean_pod_policy);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = GetOptionalInt(v, "backoffLimit", path, &rp->backoff_limit); !s.ok()) {
    return s;
  }
  if (absl::Status s =
          GetOptionalInt(v, "activeDeadlineSeconds", path, &rp->active_deadline_seconds);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          GetOptionalInt(v, "ttlSecondsAfterFinished", path, &rp->ttl_seconds_after_finished);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = GetBool(v, "suspend", path, &rp->suspend); !s.ok()) return s;
  if (auto it = v.find("schedulingPolicy"); it != v.end() && !it->is_null()) {
    const std::string sp_path = Join(path, "schedulingPolicy");
    if (absl::Status s = CheckObject(*it, sp_path); !s.ok()) return s;
    if (absl::Status s = CheckKnownFields(*it, sp_path, {"minAvailable", "queue", "priorityClass"});
        !s.ok()) {
      return s;
    }
    SchedulingPolicy sp;
    if (absl::Status s = GetOptionalInt(*it, "minAvailable", sp_path, &sp.min_available); !s.ok()) {
      return s;
    }
    if (absl::Status s = GetString(*it, "queue", sp_path, &sp.queue); !s.ok()) return s;
    if (absl::Status s = GetString(*it, "priorityClass", sp_path, &sp.priority_class); !s.ok()) {
      return s;
    }
    rp->scheduling_policy = sp;
  }
  return absl::OkStatus();
}

absl::Status MetadataFromJson(const json& v, ObjectMeta* m) {
  const std::string path = "metadata";
  if (absl::Status s = CheckObject(v, path); !s.ok()) return s;
  if (absl::Status s = GetString(v, "name", path, &m->name); !s.ok()) return s;
  if (absl::Status s = GetString(v, "namespace", path, &m->namespace_name); !s.ok()) return s;
  if (absl::Status s = GetStringMap(v, "labels", path, &m->labels); !s.ok()) return s;
  if (absl::Status s = GetStringMap(v, "annotations", path, &m->annotations); !s.ok()) return s;
  if (absl::Status s = GetString(v, "uid", path, &m->uid); !s.ok()) return s;
  if (absl::Status s = GetString(v, "resourceVersion", path, &m->resource_version); !s.ok()) {
    return s;
  }
  std::optional<int64_t> generation;
  if (absl::Status s = GetOptionalInt(v, "generation", path, &generation); !s.ok()) return s;
  m->generation = generation.value_or(0);
  return absl::OkStatus();
}

absl::Status ValidateReplica(ReplicaType type, const ReplicaSpec& spec) {
  const std::string path = absl::StrCat("spec.replicaSpecs.", ReplicaTypeName(type));
  if (spec.Replicas() < 0) {
    return FieldError(Join(path, "replicas"), absl::StrCat("must be >= 0, got ", spec.Replicas()));
  }
  if (type == ReplicaType::kChief && spec.Replicas() > 1) {
    return FieldError(Join(path, "replicas"),
                      absl::StrCat("must be 0 or 1 (at most one chief), got ", spec.Replicas()));
  }
  absl::StatusOr<Container> c = spec.FirstContainer();
  if (!c.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ".", c.status().message()));
  }
  const std::string cpath = Join(path, "template.spec.containers[0]");
  if (c->image.empty()) return FieldError(Join(cpath, "image"), "must not be empty");
  for (size_t i = 0; i < c->env.size(); ++i) {
    if (c->env[i].name.empty()) {
      return FieldError(absl::StrCat(cpath, ".env[", i, "].name"), "must not be empty");
    }
  }
  for (size_t i = 0; i < c->ports.size(); ++i) {
    const int32_t p = c->ports[i].container_port;
    if (p < 1 || p > 65535) {
      return FieldError(absl::StrCat(cpath, ".ports[", i, "].containerPort"),
                        absl::StrCat("must be in 1..65535, got ", p));
    }
  }
  return absl::OkStatus();
}

int Digits(int64_t n) {
  int d = 1;
  while (n >= 10) {
    n /= 10;
    ++d;
  }
  return d;
}

}  // namespace

std::string ReplicaTypeName(ReplicaType type) {
  switch (type) {
    case ReplicaType::kPS:
      return "PS";
    case ReplicaType::kWorker:
      return "Worker";
    case ReplicaType::kChief:
      return "Chief";
    case ReplicaType::kEvaluator:
      return "Evaluator";
  }
  return "Unknown";
}

std::string ReplicaTypeLower(ReplicaType type) { return Lower(ReplicaTypeName(type)); }

std::optional<ReplicaType> ParseReplicaType(std::string_view name) {
  const std::string lower = Lower(name);
  for (ReplicaType t : kAllReplicaTypes) {
    if (ReplicaTypeLower(t) == lower) return t;
  }
  return std::nullopt;
}

std::string RestartPolicyName(RestartPolicy policy) {
  switch (policy) {
    case RestartPolicy::kAlways:
      return "Always";
    case RestartPolicy::kOnFailure:
      return "OnFailure";
    case RestartPolicy::kNever:
      return "Never";
    case RestartPolicy::kExitCode:
      return "ExitCode";
  }
  return "Unknown";
}

std::optional<RestartPolicy> ParseRestartPolicy(std::string_view name) {
  for (RestartPolicy p : {RestartPolicy::kAlways, RestartPolicy::kOnFailure, RestartPolicy::kNever,
                          RestartPolicy::kExitCode}) {
    if (RestartPolicyName(p) == name) return p;
  }
  return std::nullopt;
}

std::string CleanPodPolicyName(CleanPodPolicy policy) {
  switch (policy) {
    case CleanPodPolicy::kRunning:
      return "Running";
    case CleanPodPolicy::kAll:
      return "All";
    case CleanPodPolicy::kNone:
      return "None";
  }
  return "Unknown";
}

std::optional<CleanPodPolicy> ParseCleanPodPolicy(std::string_view name) {
  for (CleanPodPolicy p : {CleanPodPolicy::kRunning, CleanPodPolicy::kAll, CleanPodPolicy::kNone}) {
    if (CleanPodPolicyName(p) == name) return p;
  }
  return std::nullopt;
}

std::string SuccessPolicyName(SuccessPolicy policy) {
  return policy == SuccessPolicy::kAllWorkers ? "AllWorkers" : "";
}

std::optional<SuccessPolicy> ParseSuccessPolicy(std::string_view name) {
  if (name.empty()) return SuccessPolicy::kDefault;
  if (name == "AllWorkers") return SuccessPolicy::kAllWorkers;
  return std::nullopt;
}

absl::StatusOr<Container> ReplicaSpec::FirstContainer() const {
  const std::string tpath = "template";
  if (!pod_template.is_object()) return FieldError(tpath, "must be a mapping");
  auto spec_it = pod_template.find("spec");
  if (spec_it == pod_template.end() || spec_it->is_null()) {
    return FieldError("template.spec.containers", "must have at least one container");
  }
  if (absl::Status s = CheckObject(*spec_it, "template.spec"); !s.ok()) return s;
  auto cs = spec_it->find("containers");
  if (cs == spec_it->end() || cs->is_null() || (cs->is_array() && cs->empty())) {
    return FieldError("template.spec.containers", "must have at least one container");
  }
  if (!cs->is_array()) {
    return FieldError("template.spec.containers",
                      absl::StrCat("must be a list, got ", Describe(*cs)));
  }
  const json& c = (*cs)[0];
  const std::string path = "template.spec.containers[0]";
  if (absl::Status s = CheckObject(c, path); !s.ok()) return s;
  Container out;
  if (absl::Status s = GetString(c, "name", path, &out.name); !s.ok()) return s;
  if (absl::Status s = GetString(c, "image", path, &out.image); !s.ok()) return s;
  if (absl::Status s = GetStringList(c, "command", path, &out.command); !s.ok()) return s;
  if (absl::Status s = GetStringList(c, "args", path, &out.args); !s.ok()) return s;
  if (auto env = c.find("env"); env != c.end() && !env->is_null()) {
    if (!env->is_array()) {
      return FieldError(Join(path, "env"), absl::StrCat("must be a list, got ", Describe(*env)));
    }
    for (size_t i = 0; i < env->size(); ++i) {
      const json& e = (*env)[i];
      const std::string epath = absl::StrCat(path, ".env[", i, "]");
      if (absl::Status s = CheckObject(e, epath); !s.ok()) return s;
      EnvVar var;
      if (absl::Status s = GetString(e, "name", epath, &var.name); !s.ok()) return s;
      if (absl::Status s = GetString(e, "value", epath, &var.value); !s.ok()) return s;
      auto from = e.find("valueFrom");
      var.value_from = from != e.end() && !from->is_null();
      out.env.push_back(std::move(var));
    }
  }
  if (auto ports = c.find("ports"); ports != c.end() && !ports->is_null()) {
    if (!ports->is_array()) {
      return FieldError(Join(path, "ports"),
                        absl::StrCat("must be a list, got ", Describe(*ports)));
    }
    for (size_t i = 0; i < ports->size(); ++i) {
      const json& p = (*ports)[i];
      const std::string ppath = absl::StrCat(path, ".ports[", i, "]");
      if (absl::Status s = CheckObject(p, ppath); !s.ok()) return s;
      ContainerPort port;
      if (absl::Status s = GetString(p, "name", ppath, &port.name); !s.ok()) return s;
      std::optional<int32_t> number;
      if (absl::Status s = GetOptionalInt(p, "containerPort", ppath, &number); !s.ok()) return s;
      port.container_port = number.value_or(0);
      if (absl::Status s = GetString(p, "protocol", ppath, &port.protocol); !s.ok()) return s;
      out.ports.push_back(std::move(port));
    }
  }
  return out;
}

int32_t ReplicaSpec::Port() const {
  absl::StatusOr<Container> c = FirstContainer();
  if (c.ok()) {
    for (const ContainerPort& p : c->ports) {
      if (p.name == kPortName && p.container_port > 0) return p.container_port;
    }
  }
  return kDefaultPort;
}

const ReplicaSpec* TrainingJob::Find(ReplicaType type) const {
  auto it = spec.replica_specs.find(type);
  return it == spec.replica_specs.end() ? nullptr : &it->second;
}

int32_t TrainingJob::ReplicaCount(ReplicaType type) const {
  const ReplicaSpec* s = Find(type);
  return s == nullptr ? 0 : std::max(0, s->Replicas());
}

absl::StatusOr<TrainingJob> FromJson(const json& v) {
  if (!v.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a TrainingJob must be a mapping, got ", Describe(v)));
  }
  TrainingJob job;
  job.api_version.clear();
  job.kind.clear();
  if (absl::Status s = GetString(v, "apiVersion", "", &job.api_version); !s.ok()) return s;
  if (absl::Status s = GetString(v, "kind", "", &job.kind); !s.ok()) return s;
  if (auto it = v.find("metadata"); it != v.end() && !it->is_null()) {
    if (absl::Status s = MetadataFromJson(*it, &job.metadata); !s.ok()) return s;
  }
  if (auto it = v.find("status"); it != v.end()) job.status = *it;
  auto spec_it = v.find("spec");
  if (spec_it == v.end() || spec_it->is_null()) return job;
  const json& spec = *spec_it;
  if (absl::Status s = CheckObject(spec, "spec"); !s.ok()) return s;
  if (absl::Status s =
          CheckKnownFields(spec, "spec", {"replicaSpecs", "runPolicy", "successPolicy"});
      !s.ok()) {
    return s;
  }
  if (auto rs = spec.find("replicaSpecs"); rs != spec.end() && !rs->is_null()) {
    if (absl::Status s = CheckObject(*rs, "spec.replicaSpecs"); !s.ok()) return s;
    for (const auto& [key, value] : rs->items()) {
      const std::string path = absl::StrCat("spec.replicaSpecs.", key);
      std::optional<ReplicaType> type = ParseReplicaType(key);
      if (!type) {
        return FieldError(path, "unknown replica type (known: PS, Worker, Chief, Evaluator)");
      }
      if (job.spec.replica_specs.contains(*type)) {
        return FieldError(path, absl::StrCat("duplicates replica type ", ReplicaTypeName(*type)));
      }
      absl::StatusOr<ReplicaSpec> r = ReplicaSpecFromJson(value, path);
      if (!r.ok()) return r.status();
      job.spec.replica_specs.emplace(*type, *std::move(r));
    }
  }
  if (auto rp = spec.find("runPolicy"); rp != spec.end() && !rp->is_null()) {
    if (absl::Status s = RunPolicyFromJson(*rp, "spec.runPolicy", &job.spec.run_policy); !s.ok()) {
      return s;
    }
  }
  std::optional<SuccessPolicy> sp;
  if (absl::Status s = GetEnum<SuccessPolicy>(spec, "successPolicy", "spec", &ParseSuccessPolicy,
                                              "\"\", AllWorkers", &sp);
      !s.ok()) {
    return s;
  }
  job.spec.success_policy = sp.value_or(SuccessPolicy::kDefault);
  return job;
}

json ToJson(const TrainingJob& job) {
  json out = json::object();
  out["apiVersion"] = job.api_version;
  out["kind"] = job.kind;
  json meta = json::object();
  meta["name"] = job.metadata.name;
  if (!job.metadata.namespace_name.empty()) meta["namespace"] = job.metadata.namespace_name;
  if (!job.metadata.labels.empty()) meta["labels"] = job.metadata.labels;
  if (!job.metadata.annotations.empty()) meta["annotations"] = job.metadata.annotations;
  if (!job.metadata.uid.empty()) meta["uid"] = job.metadata.uid;
  if (!job.metadata.resource_version.empty()) {
    meta["resourceVersion"] = job.metadata.resource_version;
  }
  if (job.metadata.generation != 0) meta["generation"] = job.metadata.generation;
  out["metadata"] = std::move(meta);

  json spec = json::object();
  json replicas = json::object();
  for (const auto& [type, rs] : job.spec.replica_specs) {
    json r = json::object();
    if (rs.replicas) r["replicas"] = *rs.replicas;
    if (rs.restart_policy) r["restartPolicy"] = RestartPolicyName(*rs.restart_policy);
    r["template"] = rs.pod_template;
    replicas[ReplicaTypeName(type)] = std::move(r);
  }
  spec["replicaSpecs"] = std::move(replicas);
  const RunPolicy& rp = job.spec.run_policy;
  json run = json::object();
  if (rp.clean_pod_policy) run["cleanPodPolicy"] = CleanPodPolicyName(*rp.clean_pod_policy);
  if (rp.backoff_limit) run["backoffLimit"] = *rp.backoff_limit;
  if (rp.active_deadline_seconds) run["activeDeadlineSeconds"] = *rp.active_deadline_seconds;
  if (rp.ttl_seconds_after_finished) {
    run["ttlSecondsAfterFinished"] = *rp.ttl_seconds_after_finished;
  }
  if (rp.suspend) run["suspend"] = true;
  if (rp.scheduling_policy) {
    json sp = json::object();
    if (rp.scheduling_policy->min_available) {
      sp["minAvailable"] = *rp.scheduling_policy->min_available;
    }
    if (!rp.scheduling_policy->queue.empty()) sp["queue"] = rp.scheduling_policy->queue;
    if (!rp.scheduling_policy->priority_class.empty()) {
      sp["priorityClass"] = rp.scheduling_policy->priority_class;
    }
    run["schedulingPolicy"] = std::move(sp);
  }
  if (!run.empty()) spec["runPolicy"] = std::move(run);
  if (job.spec.success_policy != SuccessPolicy::kDefault) {
    spec["successPolicy"] = SuccessPolicyName(job.spec.success_policy);
  }
  out["spec"] = std::move(spec);
  if (!job.status.is_null()) out["status"] = job.status;
  return out;
}

absl::StatusOr<TrainingJob> ParseTrainingJob(const std::string& text,
                                             const std::string& source_name) {
  absl::StatusOr<json> doc = kube::ParseYamlOrJson(text, source_name);
  if (!doc.ok()) return doc.status();
  absl::StatusOr<TrainingJob> job = FromJson(*doc);
  if (!job.ok()) {
    return absl::Status(job.status().code(),
                        absl::StrCat(source_name, ": ", job.status().message()));
  }
  return job;
}

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

absl::Status Validate(const TrainingJob& job) {
  if (job.api_version != kApiVersion) {
    return FieldError("apiVersion",
                      absl::StrCat("must be \"", kApiVersion, "\", got \"", job.api_version, "\""));
  }
  if (job.kind != kKind) {
    return FieldError("kind", absl::StrCat("must be \"", kKind, "\", got \"", job.kind, "\""));
  }
  const std::string& name = job.metadata.name;
  if (name.empty()) return FieldError("metadata.name", "must not be empty");
  if (!kube::IsDns1035Label(name)) {
    return FieldError("metadata.name",
                      absl::StrCat("\"", name,
                                   "\" is not a DNS-1035 label (at most 63 lower-case letters, "
                                   "digits and '-', starting with a letter, ending with a letter "
                                   "or digit)"));
  }
  if (!job.metadata.namespace_name.empty() && !kube::IsDns1123Label(job.metadata.namespace_name)) {
    return FieldError("metadata.namespace", absl::StrCat("\"", job.metadata.namespace_name,
                                                         "\" is not a DNS-1123 label"));
  }
  const auto& specs = job.spec.replica_specs;
  for (const auto& [type, rs] : specs) {
    if (absl::Status s = ValidateReplica(type, rs); !s.ok()) return s;
  }
  const int32_t trainers =
      job.ReplicaCount(ReplicaType::kWorker) + job.ReplicaCount(ReplicaType::kChief);
  if (specs.contains(ReplicaType::kPS) && trainers == 0) {
    return FieldError("spec.replicaSpecs.PS",
                      "parameter servers need a Worker or Chief with replicas >= 1");
  }
  if (trainers == 0) {
    return FieldError("spec.replicaSpecs", "must contain a Worker or Chief with replicas >= 1");
  }
  // Every pod and Service name <job>-<type>-<index> must be a DNS-1035 label.
  for (const auto& [type, rs] : specs) {
    if (rs.Replicas() == 0) continue;
    const std::string longest =
        absl::StrCat(name, "-", ReplicaTypeLower(type), "-", rs.Replicas() - 1);
    if (longest.size() > 63) {
      return FieldError(
          "metadata.name",
          absl::StrCat("\"", name, "\" is too long: replica name \"", longest, "\" has ",
                       longest.size(), " characters, the limit is 63 (names may use at most ",
                       63 - 2 - ReplicaTypeLower(type).size() - Digits(rs.Replicas() - 1),
                       " characters with this spec)"));
    }
  }
  const RunPolicy& rp = job.spec.run_policy;
  if (rp.backoff_limit && *rp.backoff_limit < 0) {
    return FieldError("spec.runPolicy.backoffLimit",
                      absl::StrCat("must be >= 0, got ", *rp.backoff_limit));
  }
  // A zero deadline would fail the job at once; the CRD and Kubernetes Jobs
  // refuse it too.
  if (rp.active_deadline_seconds && *rp.active_deadline_seconds < 1) {
    return FieldError("spec.runPolicy.activeDeadlineSeconds",
                      absl::StrCat("must be >= 1, got ", *rp.active_deadline_seconds));
  }
  if (rp.ttl_seconds_after_finished && *rp.ttl_seconds_after_finished < 0) {
    return FieldError("spec.runPolicy.ttlSecondsAfterFinished",
                      absl::StrCat("must be >= 0, got ", *rp.ttl_seconds_after_finished));
  }
  if (rp.scheduling_policy && rp.scheduling_policy->min_available &&
      *rp.scheduling_policy->min_available < 0) {
    return FieldError("spec.runPolicy.schedulingPolicy.minAvailable",
                      absl::StrCat("must be >= 0, got ", *rp.scheduling_policy->min_available));
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainingJob> LoadTrainingJob(const std::string& text,
                                            const std::string& source_name) {
  absl::StatusOr<TrainingJob> job = ParseTrainingJob(text, source_name);
  if (!job.ok()) return job.status();
  ApplyDefaults(*job);
  if (absl::Status s = Validate(*job); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(source_name, ": ", s.message()));
  }
  return job;
}

}  // namespace kubetrain::api
