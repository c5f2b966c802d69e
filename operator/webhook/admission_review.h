// AdmissionReview (admission.k8s.io/v1): what kube-apiserver POSTs to a
// validating admission webhook and what the webhook answers, as its Go types
// (k8s.io/api/admission/v1) write them. Only the fields a validating webhook
// reads or writes: the request's uid, kind, resource, subResource,
// operation, namespace, name, object, oldObject and dryRun; the response's
// uid, allowed, status {code, reason, message, details.causes} and warnings.
//
// Value types and pure functions; thread-safe.
#ifndef KUBETRAIN_OPERATOR_WEBHOOK_ADMISSION_REVIEW_H_
#define KUBETRAIN_OPERATOR_WEBHOOK_ADMISSION_REVIEW_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace kubetrain::webhook {

inline constexpr char kAdmissionApiVersion[] = "admission.k8s.io/v1";

struct AdmissionRequest {
  std::string uid;
  std::string kind_group, kind_version, kind;  // the object's: "autoscaling", "v1", "Scale"
  std::string resource_group, resource;        // "kubetrain.io", "trainingjobs"
  std::string sub_resource;                    // "" or "scale"
  std::string operation;                       // CREATE UPDATE DELETE CONNECT
  std::string ns, name;
  nlohmann::json object;      // null when absent (DELETE)
  nlohmann::json old_object;  // null when absent (CREATE)
  bool dry_run = false;
};

// A validating webhook's verdict. Refused: `code` (422 Invalid with a field
// cause, as a failed validation; kube-apiserver hands it to the client as
// "admission webhook ... denied the request: <message>").
struct AdmissionVerdict {
  bool allowed = true;
  int code = 200;
  std::string reason;   // "Invalid"
  std::string message;  // the whole refusal, for people: "<field>: <detail>"
  std::string field;    // the cause's field ("spec.replicas"), may be empty
  std::string detail;   // the cause's message ("Invalid value: 6: ..."), without the field
  std::vector<std::string> warnings;  // shown by kubectl even when allowed
};

// The request of an AdmissionReview body; InvalidArgument naming what is
// wrong (not JSON, not an admission.k8s.io/v1 AdmissionReview, no request
// or request.uid).
absl::StatusOr<AdmissionRequest> ParseAdmissionReview(const std::string& body);

// The AdmissionReview answer for the request `uid` (apiVersion and kind as
// the request's, which kube-apiserver requires).
nlohmann::json AdmissionResponse(const std::string& uid, const AdmissionVerdict& verdict);

}  // namespace kubetrain::webhook

#endif  // KUBETRAIN_OPERATOR_WEBHOOK_ADMISSION_REVIEW_H_
