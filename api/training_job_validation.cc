// TrainingJob semantic validation (as Kubeflow's tensorflow_validation.go),
// after decoding and defaults; errors name the field path.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/json_fields.h"
#include "api/training_job.h"
#include "base/object_names.h"

namespace kubetrain::api {
namespace {

using namespace json_fields;  // NOLINT(build/namespaces): the decoder's toolkit

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
  if (!base::IsDns1035Label(name)) {
    return FieldError("metadata.name",
                      absl::StrCat("\"", name,
                                   "\" is not a DNS-1035 label (at most 63 lower-case letters, "
                                   "digits and '-', starting with a letter, ending with a letter "
                                   "or digit)"));
  }
  if (!job.metadata.namespace_name.empty() && !base::IsDns1123Label(job.metadata.namespace_name)) {
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
  // An elastic job's workers may grow to maxReplicas.
  for (const auto& [type, rs] : specs) {
    int32_t most = rs.Replicas();
    if (type == ReplicaType::kWorker && job.spec.elastic_policy) {
      most = std::max(most, job.spec.elastic_policy->max_replicas);
    }
    if (most <= 0) continue;
    const std::string longest = absl::StrCat(name, "-", ReplicaTypeLower(type), "-", most - 1);
    if (longest.size() > 63) {
      return FieldError(
          "metadata.name",
          absl::StrCat("\"", name, "\" is too long: replica name \"", longest, "\" has ",
                       longest.size(), " characters, the limit is 63 (names may use at most ",
                       63 - 2 - ReplicaTypeLower(type).size() - Digits(most - 1),
                       " characters with this spec)"));
    }
  }
  if (const std::optional<ElasticPolicy>& ep = job.spec.elastic_policy) {
    const std::string path = "spec.elasticPolicy";
    if (!specs.contains(ReplicaType::kWorker)) {
      return FieldError(path, "needs a Worker replica spec (the elastic replica type)");
    }
    if (ep->min_replicas < 1) {
      return FieldError(Join(path, "minReplicas"),
                        absl::StrCat("must be >= 1, got ", ep->min_replicas));
    }
    if (ep->max_replicas < ep->min_replicas) {
      return FieldError(
          Join(path, "maxReplicas"),
          absl::StrCat("must be >= minReplicas (", ep->min_replicas, "), got ", ep->max_replicas));
    }
    const int32_t workers = job.ReplicaCount(ReplicaType::kWorker);
    if (workers < ep->min_replicas || workers > ep->max_replicas) {
      return FieldError("spec.replicaSpecs.Worker.replicas",
                        absl::StrCat("must be within spec.elasticPolicy [", ep->min_replicas, ", ",
                                     ep->max_replicas, "], got ", workers));
    }
  }
  const RunPolicy& rp = job.spec.run_policy;
  if (rp.backoff_limit && *rp.backoff_limit < 0) {
    return FieldError("spec.runPolicy.backoffLimit",
                      absl::StrCat("must be >= 0, got ", *rp.backoff_limit));
  }
  if (rp.stall_timeout_seconds && *rp.stall_timeout_seconds < 0) {
    return FieldError("spec.runPolicy.stallTimeoutSeconds",
                      absl::StrCat("must be >= 0 (0: off), got ", *rp.stall_timeout_seconds));
  }
  if (rp.scheduling_timeout_seconds && *rp.scheduling_timeout_seconds < 1) {
    return FieldError(
        "spec.runPolicy.schedulingTimeoutSeconds",
        absl::StrCat("must be >= 1 (absent: never), got ", *rp.scheduling_timeout_seconds));
  }
  if (rp.node_lost_timeout_seconds && *rp.node_lost_timeout_seconds < 0) {
    return FieldError("spec.runPolicy.nodeLostTimeoutSeconds",
                      absl::StrCat("must be >= 0 (0: never), got ", *rp.node_lost_timeout_seconds));
  }
  if (rp.max_disruptions && *rp.max_disruptions < 0) {
    return FieldError("spec.runPolicy.maxDisruptions",
                      absl::StrCat("must be >= 0, got ", *rp.max_disruptions));
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

std::optional<ElasticClamp> ClampElasticWorkers(TrainingJob& job) {
  if (!job.spec.elastic_policy) return std::nullopt;
  auto it = job.spec.replica_specs.find(ReplicaType::kWorker);
  if (it == job.spec.replica_specs.end()) return std::nullopt;
  const ElasticPolicy& ep = *job.spec.elastic_policy;
  // A policy Validate refuses is left for it to report.
  if (ep.min_replicas < 1 || ep.max_replicas < ep.min_replicas) return std::nullopt;
  const int32_t asked = it->second.Replicas();
  const int32_t allowed = std::clamp(asked, ep.min_replicas, ep.max_replicas);
  if (allowed == asked) return std::nullopt;
  it->second.replicas = allowed;
  return ElasticClamp{asked, allowed};
}

std::string ElasticBoundMessage(const ElasticClamp& clamp) {
  return clamp.asked > clamp.allowed
             ? absl::StrCat(clamp.asked, " is above spec.elasticPolicy.maxReplicas ", clamp.allowed)
             : absl::StrCat(clamp.asked, " is below spec.elasticPolicy.minReplicas ",
                            clamp.allowed);
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
