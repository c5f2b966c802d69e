#include "operator/webhook/admission_review.h"

#include "absl/strings/str_cat.h"

namespace kubetrain::webhook {
namespace {

using json = nlohmann::json;

std::string Str(const json& o, const char* key) {
  if (!o.is_object()) return "";
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

absl::StatusOr<AdmissionRequest> ParseAdmissionReview(const std::string& body) {
  const json review = json::parse(body, nullptr, false);
  if (review.is_discarded() || !review.is_object()) {
    return absl::InvalidArgumentError("the AdmissionReview is not a JSON object");
  }
  if (Str(review, "apiVersion") != kAdmissionApiVersion ||
      Str(review, "kind") != "AdmissionReview") {
    return absl::InvalidArgumentError(
        absl::StrCat("not an ", kAdmissionApiVersion, " AdmissionReview: apiVersion \"",
                     Str(review, "apiVersion"), "\", kind \"", Str(review, "kind"),
                     "\" (the webhook configuration's admissionReviewVersions must be [v1])"));
  }
  auto r = review.find("request");
  if (r == review.end() || !r->is_object()) {
    return absl::InvalidArgumentError("the AdmissionReview has no request");
  }
  AdmissionRequest out;
  out.uid = Str(*r, "uid");
  if (out.uid.empty()) return absl::InvalidArgumentError("the AdmissionReview request has no uid");
  if (auto k = r->find("kind"); k != r->end()) {
    out.kind_group = Str(*k, "group");
    out.kind_version = Str(*k, "version");
    out.kind = Str(*k, "kind");
  }
  if (auto res = r->find("resource"); res != r->end()) {
    out.resource_group = Str(*res, "group");
    out.resource = Str(*res, "resource");
  }
  out.sub_resource = Str(*r, "subResource");
  out.operation = Str(*r, "operation");
  out.ns = Str(*r, "namespace");
  out.name = Str(*r, "name");
  if (auto o = r->find("object"); o != r->end()) out.object = *o;
  if (auto o = r->find("oldObject"); o != r->end()) out.old_object = *o;
  if (auto d = r->find("dryRun"); d != r->end() && d->is_boolean()) out.dry_run = d->get<bool>();
  return out;
}

json AdmissionResponse(const std::string& uid, const AdmissionVerdict& verdict) {
  json response = {{"uid", uid}, {"allowed", verdict.allowed}};
  if (!verdict.allowed) {
    json status = {{"code", verdict.code}, {"message", verdict.message}};
    if (!verdict.reason.empty()) status["reason"] = verdict.reason;
    if (!verdict.field.empty()) {
      status["details"] = {{"causes", json::array({{{"type", "FieldValueInvalid"},
                                                    {"message", verdict.detail},
                                                    {"field", verdict.field}}})}};
    }
    response["status"] = std::move(status);
  }
  if (!verdict.warnings.empty()) response["warnings"] = verdict.warnings;
  return {{"apiVersion", kAdmissionApiVersion},
          {"kind", "AdmissionReview"},
          {"response", std::move(response)}};
}

}  // namespace kubetrain::webhook
