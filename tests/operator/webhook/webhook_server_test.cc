#include "operator/webhook/webhook_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/clock.h"
#include "operator/kube/cpprest_transport.h"
#include "operator/kube/kube_config.h"
#include "operator/kube/serving_cert.h"
#include "tests/support/self_signed_cert.h"

namespace kubetrain::webhook {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr char kJob[] = R"(
apiVersion: kubetrain.io/v1alpha1
kind: TrainingJob
metadata: {name: fm, namespace: team}
spec:
  elasticPolicy: {minReplicas: 1, maxReplicas: 2}
  replicaSpecs:
    Worker:
      replicas: 2
      template: {spec: {containers: [{name: main, image: kubetrain}]}}
)";

std::string ScaleReview(int replicas) {
  json r = {{"apiVersion", "admission.k8s.io/v1"},
            {"kind", "AdmissionReview"},
            {"request",
             {{"uid", "u-1"},
              {"kind", {{"group", "autoscaling"}, {"version", "v1"}, {"kind", "Scale"}}},
              {"resource",
               {{"group", "kubetrain.io"}, {"version", "v1alpha1"}, {"resource", "trainingjobs"}}},
              {"subResource", "scale"},
              {"operation", "UPDATE"},
              {"namespace", "team"},
              {"name", "fm"},
              {"object", {{"spec", {{"replicas", replicas}}}}}}}};
  return r.dump();
}

class WebhookServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<kube::ServingCert> cert =
        testing_util::SelfSignedCert("kubetrain-webhook.kt.svc");
    ASSERT_TRUE(cert.ok()) << cert.status();
    cert_ = *cert;
    kube::HttpsServerOptions o;
    o.cert_pem = cert_.cert_pem;
    o.key_pem = cert_.key_pem;
    absl::StatusOr<std::unique_ptr<WebhookServer>> s = WebhookServer::Start(
        o,
        [](const std::string& ns, const std::string& name) -> absl::StatusOr<api::TrainingJob> {
          if (ns == "team" && name == "fm") return api::LoadTrainingJob(kJob, "job.yaml");
          return absl::NotFoundError("not found");
        },
        log_);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }

  // A client that verifies the server against `ca_pem`, as kube-apiserver
  // does with the configuration's caBundle.
  absl::StatusOr<kube::HttpResponse> Send(const std::string& method, const std::string& path,
                                          const std::string& body, const std::string& ca_pem) {
    kube::KubeConfig c;
    c.server = absl::StrCat("https://127.0.0.1:", server_->port());
    c.ca_pem = ca_pem;
    absl::StatusOr<std::unique_ptr<kube::CpprestTransport>> t =
        kube::CpprestTransport::Create(c, {}, env_, clock_);
    if (!t.ok()) return t.status();
    return (*t)->Send({method, path, body.empty() ? "" : "application/json", body});
  }

  kube::NullLogger log_;
  kube::RealConfigEnvironment env_;
  RealClock clock_;
  kube::ServingCert cert_;
  std::unique_ptr<WebhookServer> server_;
};

TEST_F(WebhookServerTest, AnswersAVerifiedClientWithTheVerdict) {
  absl::StatusOr<kube::HttpResponse> ok =
      Send("POST", kValidatePath, ScaleReview(2), cert_.cert_pem);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(json::parse(ok->body)["response"], json::parse(R"({"uid": "u-1", "allowed": true})"));
  absl::StatusOr<kube::HttpResponse> refused =
      Send("POST", kValidatePath, ScaleReview(3), cert_.cert_pem);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->status, 200);
  const json r = json::parse(refused->body)["response"];
  EXPECT_EQ(r["allowed"], false);
  EXPECT_EQ(r["status"]["code"], 422);
  EXPECT_EQ(r["status"]["message"],
            "spec.replicas: Invalid value: 3: 3 is above spec.elasticPolicy.maxReplicas 2");
}

TEST_F(WebhookServerTest, BadRequestsGetTheirCodes) {
  absl::StatusOr<kube::HttpResponse> garbage = Send("POST", kValidatePath, "{", cert_.cert_pem);
  ASSERT_TRUE(garbage.ok()) << garbage.status();
  EXPECT_EQ(garbage->status, 400);
  EXPECT_THAT(garbage->body, HasSubstr("not a JSON object"));
  absl::StatusOr<kube::HttpResponse> elsewhere =
      Send("POST", "/mutate", ScaleReview(2), cert_.cert_pem);
  ASSERT_TRUE(elsewhere.ok()) << elsewhere.status();
  EXPECT_EQ(elsewhere->status, 404);
  absl::StatusOr<kube::HttpResponse> get = Send("GET", kValidatePath, "", cert_.cert_pem);
  ASSERT_TRUE(get.ok()) << get.status();
  EXPECT_EQ(get->status, 405);
}

TEST_F(WebhookServerTest, AClientTrustingAnotherCaDoesNotConnect) {
  absl::StatusOr<kube::ServingCert> stranger = testing_util::SelfSignedCert("someone-else");
  ASSERT_TRUE(stranger.ok()) << stranger.status();
  absl::StatusOr<kube::HttpResponse> r =
      Send("POST", kValidatePath, ScaleReview(2), stranger->cert_pem);
  EXPECT_FALSE(r.ok() && r->status == 200);
}

}  // namespace
}  // namespace kubetrain::webhook
