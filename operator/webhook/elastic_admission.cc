#include "operator/webhook/elastic_admission.h"

#include <cstdint>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "operator/kube/resource.h"

namespace kubetrain::webhook {
namespace {

using api::ElasticClamp;
using api::ReplicaType;
using api::TrainingJob;

// The refusal of `asked` workers for `job` (whose Worker replicas are set to
// them), or nullopt when they lie within its policy.
std::optional<AdmissionVerdict> Refusal(TrainingJob job, const std::string& field) {
  const std::optional<ElasticClamp> clamp = api::ClampElasticWorkers(job);
  if (!clamp) return std::nullopt;
  AdmissionVerdict v;
  v.allowed = false;
  v.code = 422;
  v.reason = "Invalid";
  v.field = field;
  v.detail = absl::StrCat("Invalid value: ", clamp->asked, ": ", api::ElasticBoundMessage(*clamp));
  v.message = absl::StrCat(field, ": ", v.detail);
  return v;
}

AdmissionVerdict AllowedWithWarning(std::string warning) {
  AdmissionVerdict v;
  v.warnings.push_back(std::move(warning));
  return v;
}

AdmissionVerdict ReviewScale(const AdmissionRequest& request, const JobLookup& lookup) {
  const nlohmann::json& spec = request.object.is_object()
                                   ? request.object.value("spec", nlohmann::json())
                                   : nlohmann::json();
  if (!spec.is_object() || !spec.contains("replicas") || !spec["replicas"].is_number_integer()) {
    return {};  // the API server refuses a Scale without replicas itself
  }
  const int64_t replicas = spec["replicas"].get<int64_t>();
  absl::StatusOr<TrainingJob> job = lookup(request.ns, request.name);
  if (absl::IsNotFound(job.status())) return {};
  if (!job.ok()) {
    return AllowedWithWarning(
        absl::StrCat("kubetrain-operator could not read trainingjob ", request.ns, "/",
                     request.name, " to check spec.elasticPolicy (", job.status().message(),
                     "); the operator still runs at most maxReplicas workers"));
  }
  if (!job->Elastic() || job->Find(ReplicaType::kWorker) == nullptr) return {};
  if (replicas > std::numeric_limits<int32_t>::max()) {
    AdmissionVerdict v;
    v.allowed = false;
    v.code = 422;
    v.reason = "Invalid";
    v.field = "spec.replicas";
    v.detail = absl::StrCat("Invalid value: ", replicas, ": out of range");
    v.message = absl::StrCat(v.field, ": ", v.detail);
    return v;
  }
  job->spec.replica_specs[ReplicaType::kWorker].replicas = static_cast<int32_t>(replicas);
  std::optional<AdmissionVerdict> refused = Refusal(*std::move(job), "spec.replicas");
  return refused ? *refused : AdmissionVerdict{};
}

AdmissionVerdict ReviewObject(const AdmissionRequest& request) {
  absl::StatusOr<TrainingJob> next = api::FromJson(request.object);
  // A spec that does not parse is the schema's and the operator's to report.
  if (!next.ok() || !next->Elastic() || next->Find(ReplicaType::kWorker) == nullptr) return {};
  absl::StatusOr<TrainingJob> before = api::FromJson(request.old_object);
  if (before.ok() && before->spec.elastic_policy == next->spec.elastic_policy &&
      before->ReplicaCount(ReplicaType::kWorker) == next->ReplicaCount(ReplicaType::kWorker)) {
    return {};
  }
  std::optional<AdmissionVerdict> refused =
      Refusal(*std::move(next), "spec.replicaSpecs.Worker.replicas");
  return refused ? *refused : AdmissionVerdict{};
}

}  // namespace

AdmissionVerdict ReviewTrainingJob(const AdmissionRequest& request, const JobLookup& lookup) {
  if (request.resource_group != kube::kTrainingJobs.group ||
      request.resource != kube::kTrainingJobs.plural || request.operation != "UPDATE") {
    return {};
  }
  if (request.sub_resource == "scale") return ReviewScale(request, lookup);
  if (request.sub_resource.empty()) return ReviewObject(request);
  return {};
}

}  // namespace kubetrain::webhook
