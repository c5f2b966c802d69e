// The API emulator's validating admission, as kube-apiserver's: which writes
// reach a webhook (rules, namespaceSelector), what the client gets back for
// a refusal, and what a failed call does under each failurePolicy. The
// webhook is an HTTPS server in the test with a certificate made for
// 127.0.0.1, trusted through the configuration's caBundle.
#include "testing/kube_emulator_admission.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "operator/kube/https_server.h"
#include "operator/kube/serving_cert.h"
#include "tests/support/self_signed_cert.h"

namespace kubetrain::testing {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

const ResourceType& TrainingJobs() {
  for (const ResourceType& rt : ServedResources()) {
    if (rt.plural == "trainingjobs") return rt;
  }
  std::abort();
}

class KubeEmulatorAdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<kube::ServingCert> cert = testing_util::SelfSignedCert("webhook");
    ASSERT_TRUE(cert.ok()) << cert.status();
    cert_ = *cert;
    kube::HttpsServerOptions o;
    o.cert_pem = cert_.cert_pem;
    o.key_pem = cert_.key_pem;
    absl::StatusOr<std::unique_ptr<kube::HttpsServer>> s =
        kube::HttpsServer::Start(o, [this](const kube::HttpsRequest& r, kube::HttpsReply& reply) {
          const json review = json::parse(r.body, nullptr, false);
          std::function<json(const json&)> answer;
          {
            absl::MutexLock lock(&mu_);
            seen_.push_back(review);
            answer = answer_;
          }
          reply.Respond(200, "application/json", answer(review).dump());
        });
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    Answer([](const json& review) { return Allowed(review); });
  }

  static json Allowed(const json& review) {
    return {{"apiVersion", "admission.k8s.io/v1"},
            {"kind", "AdmissionReview"},
            {"response", {{"uid", review["request"]["uid"]}, {"allowed", true}}}};
  }
  void Answer(std::function<json(const json&)> f) {
    absl::MutexLock lock(&mu_);
    answer_ = std::move(f);
  }
  std::vector<json> Seen() {
    absl::MutexLock lock(&mu_);
    return seen_;
  }

  json Webhook(const std::string& name, const json& resources, const std::string& policy = "Fail",
               const std::string& ca = "") const {
    return {{"name", name},
            {"failurePolicy", policy},
            {"timeoutSeconds", 5},
            {"clientConfig",
             {{"url", absl::StrCat("https://127.0.0.1:", server_->port(), "/validate")},
              {"caBundle", absl::Base64Escape(ca.empty() ? cert_.cert_pem : ca)}}},
            {"rules", json::array({{{"apiGroups", {"kubetrain.io"}},
                                    {"apiVersions", {"v1alpha1"}},
                                    {"operations", {"UPDATE"}},
                                    {"resources", resources}}})}};
  }
  // One configuration holding `webhook`.
  static json Configs(const json& webhook) {
    json config = json::object();
    config["metadata"] = {{"name", "c"}};
    config["webhooks"] = json::array();
    config["webhooks"].push_back(webhook);
    json configs = json::array();
    configs.push_back(config);
    return configs;
  }
  static AdmissionAttributes ScaleUpdate() {
    AdmissionAttributes a;
    a.rt = &TrainingJobs();
    a.sub_resource = "scale";
    a.operation = "UPDATE";
    a.ns = "team";
    a.name = "fm";
    a.kind_group = "autoscaling";
    a.kind_version = "v1";
    a.kind = "Scale";
    a.object = {{"spec", {{"replicas", 6}}}};
    a.old_object = {{"spec", {{"replicas", 3}}}};
    a.namespace_labels = {{"tier", "gpu"}};
    return a;
  }

  absl::Mutex mu_;
  std::vector<json> seen_ ABSL_GUARDED_BY(mu_);
  std::function<json(const json&)> answer_ ABSL_GUARDED_BY(mu_);
  kube::ServingCert cert_;
  std::unique_ptr<kube::HttpsServer> server_;
};

TEST_F(KubeEmulatorAdmissionTest, OnlyMatchingWritesReachTheWebhookWithTheirReview) {
  // Rules naming the resource itself do not match its scale subresource.
  EXPECT_EQ(RunValidatingWebhooks(Configs(Webhook("main", {"trainingjobs"})), ScaleUpdate()),
            std::nullopt);
  AdmissionAttributes create = ScaleUpdate();
  create.operation = "CREATE";
  EXPECT_EQ(RunValidatingWebhooks(Configs(Webhook("s", {"trainingjobs/scale"})), create),
            std::nullopt);
  json elsewhere = Webhook("s", {"trainingjobs/scale"});
  elsewhere["namespaceSelector"] = {{"matchLabels", {{"tier", "cpu"}}}};
  EXPECT_EQ(RunValidatingWebhooks(Configs(elsewhere), ScaleUpdate()), std::nullopt);
  EXPECT_TRUE(Seen().empty());

  json here = Webhook("s", {"trainingjobs/scale"});
  here["namespaceSelector"] = {
      {"matchExpressions",
       json::array({{{"key", "tier"}, {"operator", "In"}, {"values", {"gpu"}}}})}};
  EXPECT_EQ(RunValidatingWebhooks(Configs(here), ScaleUpdate()), std::nullopt);
  EXPECT_EQ(RunValidatingWebhooks(Configs(Webhook("any", {"*/*"})), ScaleUpdate()), std::nullopt);
  const std::vector<json> seen = Seen();
  ASSERT_EQ(seen.size(), 2u);
  const json& r = seen[0]["request"];
  EXPECT_EQ(seen[0]["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(r["kind"], (json{{"group", "autoscaling"}, {"version", "v1"}, {"kind", "Scale"}}));
  EXPECT_EQ(r["resource"]["resource"], "trainingjobs");
  EXPECT_EQ(r["subResource"], "scale");
  EXPECT_EQ(r["operation"], "UPDATE");
  EXPECT_EQ(r["namespace"], "team");
  EXPECT_EQ(r["name"], "fm");
  EXPECT_EQ(r["object"]["spec"]["replicas"], 6);
  EXPECT_EQ(r["oldObject"]["spec"]["replicas"], 3);
  EXPECT_NE(r["uid"], seen[1]["request"]["uid"]);
}

TEST_F(KubeEmulatorAdmissionTest, ARefusalReachesTheClientAsTheApiServerWritesIt) {
  Answer([](const json& review) {
    json a = Allowed(review);
    a["response"]["allowed"] = false;
    a["response"]["status"] = {{"code", 422},
                               {"reason", "Invalid"},
                               {"message", "spec.replicas: Invalid value: 6: too many"},
                               {"details",
                                {{"causes", json::array({{{"type", "FieldValueInvalid"},
                                                          {"message", "Invalid value: 6: too many"},
                                                          {"field", "spec.replicas"}}})}}}};
    return a;
  });
  std::optional<ApiResult> refused = RunValidatingWebhooks(
      Configs(Webhook("v.kubetrain.io", {"trainingjobs/scale"})), ScaleUpdate());
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->code, 422);
  EXPECT_EQ(refused->body["reason"], "Invalid");
  EXPECT_EQ(refused->body["message"],
            "admission webhook \"v.kubetrain.io\" denied the request: spec.replicas: Invalid "
            "value: 6: too many");
  EXPECT_EQ(refused->body["details"]["causes"][0]["field"], "spec.replicas");

  // No status at all: 403, "without explanation".
  Answer([](const json& review) {
    json a = Allowed(review);
    a["response"]["allowed"] = false;
    return a;
  });
  refused = RunValidatingWebhooks(Configs(Webhook("v.kubetrain.io", {"trainingjobs/scale"})),
                                  ScaleUpdate());
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->code, 403);
  EXPECT_EQ(refused->body["message"],
            "admission webhook \"v.kubetrain.io\" denied the request without explanation");
}

TEST_F(KubeEmulatorAdmissionTest, AFailedCallRefusesUnderFailAndPassesUnderIgnore) {
  // An answer for another request.
  Answer([](const json& review) {
    json a = Allowed(review);
    a["response"]["uid"] = "someone-else";
    return a;
  });
  std::optional<ApiResult> failed = RunValidatingWebhooks(
      Configs(Webhook("v.kubetrain.io", {"trainingjobs/scale"})), ScaleUpdate());
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->code, 500);
  EXPECT_THAT(failed->body["message"].get<std::string>(),
              HasSubstr("failed calling webhook \"v.kubetrain.io\": expected response.uid"));
  EXPECT_EQ(
      RunValidatingWebhooks(Configs(Webhook("v.kubetrain.io", {"trainingjobs/scale"}, "Ignore")),
                            ScaleUpdate()),
      std::nullopt);

  // A certificate the caBundle does not vouch for: no call gets through.
  Answer([](const json& review) { return Allowed(review); });
  absl::StatusOr<kube::ServingCert> stranger = testing_util::SelfSignedCert("someone-else");
  ASSERT_TRUE(stranger.ok());
  const size_t calls = Seen().size();
  failed = RunValidatingWebhooks(
      Configs(Webhook("v.kubetrain.io", {"trainingjobs/scale"}, "Fail", stranger->cert_pem)),
      ScaleUpdate());
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->code, 500);
  EXPECT_EQ(Seen().size(), calls);

  // Nobody listening.
  json gone = Webhook("v.kubetrain.io", {"trainingjobs/scale"});
  server_.reset();
  failed = RunValidatingWebhooks(Configs(gone), ScaleUpdate());
  ASSERT_TRUE(failed.has_value());
  EXPECT_THAT(failed->body["message"].get<std::string>(), HasSubstr("failed calling webhook"));
  gone["failurePolicy"] = "Ignore";
  EXPECT_EQ(RunValidatingWebhooks(Configs(gone), ScaleUpdate()), std::nullopt);
}

}  // namespace
}  // namespace kubetrain::testing
