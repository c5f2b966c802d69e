// The webhook's verdict on a write to a TrainingJob: an elastic job's
// Worker replicas must stay within spec.elasticPolicy [minReplicas,
// maxReplicas], so `kubectl scale tj/x --replicas=N` (the scale
// subresource, also what an HPA or Kueue drives) and an edit of the spec
// outside them are refused by the API server itself, with the bound named:
//   spec.replicas: Invalid value: 6: 6 is above spec.elasticPolicy.maxReplicas 4
// What it reviews (UPDATE; the operator validates a created job and reports
// an invalid one in its status):
//   trainingjobs/scale: the Scale's spec.replicas against the job's policy
//     (the job read with `lookup`: a Scale carries no policy);
//   trainingjobs: the new object, when its Worker replicas or its policy
//     changed (an unrelated edit of a job already outside is not blocked).
// Everything else is allowed. It fails open: a job it cannot read or parse
// is allowed with a warning, and the operator's clamp
// (api::ClampElasticWorkers, the ScaleRefused event) still holds the bound.
//
// Pure given `lookup`; thread-safe when `lookup` is.
#ifndef KUBETRAIN_OPERATOR_WEBHOOK_ELASTIC_ADMISSION_H_
#define KUBETRAIN_OPERATOR_WEBHOOK_ELASTIC_ADMISSION_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "api/training_job.h"
#include "operator/webhook/admission_review.h"

namespace kubetrain::webhook {

// Reads a TrainingJob as stored (NotFound when it is not).
using JobLookup =
    std::function<absl::StatusOr<api::TrainingJob>(const std::string& ns, const std::string& name)>;

AdmissionVerdict ReviewTrainingJob(const AdmissionRequest& request, const JobLookup& lookup);

}  // namespace kubetrain::webhook

#endif  // KUBETRAIN_OPERATOR_WEBHOOK_ELASTIC_ADMISSION_H_
