// TrainingJob types: enum names, the replica's first container and port,
// lookups. Decoding is training_job_json.cc, defaults training_job_defaults.cc,
// validation training_job_validation.cc.
#include "api/training_job.h"

#include <cctype>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/json_fields.h"

namespace kubetrain::api {
namespace {

using nlohmann::json;
using namespace json_fields;  // NOLINT(build/namespaces): the decoder's toolkit

}  // namespace

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

std::string StallPolicyName(StallPolicy policy) {
  switch (policy) {
    case StallPolicy::kNone:
      return "None";
    case StallPolicy::kRestart:
      return "Restart";
    case StallPolicy::kFail:
      return "Fail";
  }
  return "Unknown";
}

std::optional<StallPolicy> ParseStallPolicy(std::string_view name) {
  for (StallPolicy p : {StallPolicy::kNone, StallPolicy::kRestart, StallPolicy::kFail}) {
    if (StallPolicyName(p) == name) return p;
  }
  return std::nullopt;
}

std::string UnschedulablePolicyName(UnschedulablePolicy policy) {
  return policy == UnschedulablePolicy::kFail ? "Fail" : "Wait";
}

std::optional<UnschedulablePolicy> ParseUnschedulablePolicy(std::string_view name) {
  for (UnschedulablePolicy p : {UnschedulablePolicy::kWait, UnschedulablePolicy::kFail}) {
    if (UnschedulablePolicyName(p) == name) return p;
  }
  return std::nullopt;
}

std::string SuccessPolicyName(SuccessPolicy policy) {
  return policy == SuccessPolicy::kAllWorkers ? "AllWorkers" : "";
}

std::string ServiceModeName(ServiceMode mode) {
  return mode == ServiceMode::kPerJob ? "PerJob" : "PerReplica";
}

std::optional<ServiceMode> ParseServiceMode(std::string_view name) {
  if (name == "PerReplica") return ServiceMode::kPerReplica;
  if (name == "PerJob") return ServiceMode::kPerJob;
  return std::nullopt;
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

}  // namespace kubetrain::api
