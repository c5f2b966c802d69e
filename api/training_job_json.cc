// TrainingJob <-> JSON: structural decoding (types, unknown fields, enums)
// with errors naming the field path, and encoding.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/json_fields.h"
#include "api/training_job.h"
#include "base/yaml_json.h"

namespace kubetrain::api {
namespace {

using nlohmann::json;
using namespace json_fields;  // NOLINT(build/namespaces): the decoder's toolkit

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
  if (absl::Status s = CheckKnownFields(
          v, path,
          {"cleanPodPolicy", "backoffLimit", "maxDisruptions", "stallTimeoutSeconds", "stallPolicy",
           "schedulingTimeoutSeconds", "unschedulablePolicy", "nodeLostTimeoutSeconds",
           "activeDeadlineSeconds", "ttlSecondsAfterFinished", "suspend", "schedulingPolicy"});
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
  if (absl::Status s = GetOptionalInt(v, "maxDisruptions", path, &rp->max_disruptions); !s.ok()) {
    return s;
  }
  if (absl::Status s = GetOptionalInt(v, "stallTimeoutSeconds", path, &rp->stall_timeout_seconds);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = GetEnum<StallPolicy>(v, "stallPolicy", path, &ParseStallPolicy,
                                            "None, Restart, Fail", &rp->stall_policy);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          GetOptionalInt(v, "schedulingTimeoutSeconds", path, &rp->scheduling_timeout_seconds);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          GetEnum<UnschedulablePolicy>(v, "unschedulablePolicy", path, &ParseUnschedulablePolicy,
                                       "Wait, Fail", &rp->unschedulable_policy);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          GetOptionalInt(v, "nodeLostTimeoutSeconds", path, &rp->node_lost_timeout_seconds);
      !s.ok()) {
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

}  // namespace

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
  if (auto it = v.find("status"); it != v.end() && !it->is_null()) {
    absl::StatusOr<JobStatus> status = StatusFromJson(*it);
    if (!status.ok()) return status.status();
    job.status = *std::move(status);
  }
  auto spec_it = v.find("spec");
  if (spec_it == v.end() || spec_it->is_null()) return job;
  const json& spec = *spec_it;
  if (absl::Status s = CheckObject(spec, "spec"); !s.ok()) return s;
  if (absl::Status s = CheckKnownFields(
          spec, "spec",
          {"replicaSpecs", "runPolicy", "successPolicy", "serviceMode", "elasticPolicy"});
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
  std::optional<ServiceMode> mode;
  if (absl::Status s = GetEnum<ServiceMode>(spec, "serviceMode", "spec", &ParseServiceMode,
                                            "PerReplica, PerJob", &mode);
      !s.ok()) {
    return s;
  }
  job.spec.service_mode = mode.value_or(ServiceMode::kPerReplica);
  if (auto ep = spec.find("elasticPolicy"); ep != spec.end() && !ep->is_null()) {
    const std::string path = "spec.elasticPolicy";
    if (absl::Status s = CheckObject(*ep, path); !s.ok()) return s;
    if (absl::Status s = CheckKnownFields(*ep, path, {"minReplicas", "maxReplicas"}); !s.ok()) {
      return s;
    }
    std::optional<int32_t> min, max;
    if (absl::Status s = GetOptionalInt(*ep, "minReplicas", path, &min); !s.ok()) return s;
    if (absl::Status s = GetOptionalInt(*ep, "maxReplicas", path, &max); !s.ok()) return s;
    if (!min) return FieldError(Join(path, "minReplicas"), "is required");
    if (!max) return FieldError(Join(path, "maxReplicas"), "is required");
    job.spec.elastic_policy = ElasticPolicy{*min, *max};
  }
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
  if (rp.max_disruptions) run["maxDisruptions"] = *rp.max_disruptions;
  if (rp.stall_timeout_seconds) run["stallTimeoutSeconds"] = *rp.stall_timeout_seconds;
  if (rp.stall_policy) run["stallPolicy"] = StallPolicyName(*rp.stall_policy);
  if (rp.scheduling_timeout_seconds) {
    run["schedulingTimeoutSeconds"] = *rp.scheduling_timeout_seconds;
  }
  if (rp.node_lost_timeout_seconds) {
    run["nodeLostTimeoutSeconds"] = *rp.node_lost_timeout_seconds;
  }
  if (rp.unschedulable_policy) {
    run["unschedulablePolicy"] = UnschedulablePolicyName(*rp.unschedulable_policy);
  }
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
  if (job.spec.service_mode != ServiceMode::kPerReplica) {
    spec["serviceMode"] = ServiceModeName(job.spec.service_mode);
  }
  if (job.spec.elastic_policy) {
    spec["elasticPolicy"] = json{{"minReplicas", job.spec.elastic_policy->min_replicas},
                                 {"maxReplicas", job.spec.elastic_policy->max_replicas}};
  }
  out["spec"] = std::move(spec);
  if (job.status) out["status"] = StatusToJson(*job.status);
  return out;
}

absl::StatusOr<TrainingJob> ParseTrainingJob(const std::string& text,
                                             const std::string& source_name) {
  absl::StatusOr<json> doc = base::ParseYamlOrJson(text, source_name);
  if (!doc.ok()) return doc.status();
  absl::StatusOr<TrainingJob> job = FromJson(*doc);
  if (!job.ok()) {
    return absl::Status(job.status().code(),
                        absl::StrCat(source_name, ": ", job.status().message()));
  }
  return job;
}

}  // namespace kubetrain::api
