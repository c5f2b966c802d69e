#include "operator/webhook/admission_review.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kubetrain::webhook {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

// What kube-apiserver v1.20 sends for `kubectl scale tj/fm --replicas=6`.
constexpr char kScaleReview[] = R"({
  "kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
  "request": {
    "uid": "3d8f1c1e-5a6b-4c7d-8e9f-0a1b2c3d4e5f",
    "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
    "resource": {"group": "kubetrain.io", "version": "v1alpha1", "resource": "trainingjobs"},
    "subResource": "scale",
    "requestKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
    "name": "fm", "namespace": "team", "operation": "UPDATE",
    "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters"]},
    "object": {"kind": "Scale", "apiVersion": "autoscaling/v1",
               "metadata": {"name": "fm", "namespace": "team"}, "spec": {"replicas": 6},
               "status": {"replicas": 3}},
    "oldObject": {"kind": "Scale", "apiVersion": "autoscaling/v1",
                  "metadata": {"name": "fm", "namespace": "team"}, "spec": {"replicas": 3},
                  "status": {"replicas": 3}},
    "dryRun": false,
    "options": {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}
  }
})";

TEST(AdmissionReviewTest, ReadsTheRequestKubeApiserverSends) {
  absl::StatusOr<AdmissionRequest> r = ParseAdmissionReview(kScaleReview);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->uid, "3d8f1c1e-5a6b-4c7d-8e9f-0a1b2c3d4e5f");
  EXPECT_EQ(r->kind, "Scale");
  EXPECT_EQ(r->kind_group, "autoscaling");
  EXPECT_EQ(r->resource_group, "kubetrain.io");
  EXPECT_EQ(r->resource, "trainingjobs");
  EXPECT_EQ(r->sub_resource, "scale");
  EXPECT_EQ(r->operation, "UPDATE");
  EXPECT_EQ(r->ns, "team");
  EXPECT_EQ(r->name, "fm");
  EXPECT_EQ(r->object["spec"]["replicas"], 6);
  EXPECT_EQ(r->old_object["spec"]["replicas"], 3);
  EXPECT_FALSE(r->dry_run);
}

TEST(AdmissionReviewTest, AnythingElseIsAClearError) {
  EXPECT_THAT(ParseAdmissionReview("{not json").status().message(), HasSubstr("not a JSON"));
  json v1beta1 = json::parse(kScaleReview);
  v1beta1["apiVersion"] = "admission.k8s.io/v1beta1";
  EXPECT_THAT(ParseAdmissionReview(v1beta1.dump()).status().message(),
              HasSubstr("admissionReviewVersions must be [v1]"));
  json no_request = json::parse(kScaleReview);
  no_request.erase("request");
  EXPECT_TRUE(absl::IsInvalidArgument(ParseAdmissionReview(no_request.dump()).status()));
  json no_uid = json::parse(kScaleReview);
  no_uid["request"].erase("uid");
  EXPECT_THAT(ParseAdmissionReview(no_uid.dump()).status().message(), HasSubstr("no uid"));
}

TEST(AdmissionReviewTest, AnswersAsTheApiServerReadsThem) {
  EXPECT_EQ(AdmissionResponse("u", AdmissionVerdict{}),
            json::parse(R"({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                            "response": {"uid": "u", "allowed": true}})"));
  AdmissionVerdict refused;
  refused.allowed = false;
  refused.code = 422;
  refused.reason = "Invalid";
  refused.field = "spec.replicas";
  refused.message = "spec.replicas: Invalid value: 6: too many";
  refused.detail = "Invalid value: 6: too many";
  refused.warnings = {"careful"};
  EXPECT_EQ(AdmissionResponse("u", refused), json::parse(R"({
    "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
    "response": {"uid": "u", "allowed": false, "warnings": ["careful"],
                 "status": {"code": 422, "reason": "Invalid",
                            "message": "spec.replicas: Invalid value: 6: too many",
                            "details": {"causes": [{"type": "FieldValueInvalid",
                                                    "message": "Invalid value: 6: too many",
                                                    "field": "spec.replicas"}]}}}})"));
}

}  // namespace
}  // namespace kubetrain::webhook
