// The admission webhook through an API server: its certificate kept in a
// Secret and published as a ValidatingWebhookConfiguration's caBundle, then
// `kubectl scale` (the scale subresource) and a spec edit outside
// spec.elasticPolicy refused by the API server itself, within it let
// through. Against the API emulator, which calls webhooks as kube-apiserver
// does, or (label realapi) a real kube-apiserver, which calls this test's
// webhook on loopback.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "operator/kube/api_error.h"
#include "operator/kube/resource.h"
#include "operator/webhook/webhook_certs.h"
#include "operator/webhook/webhook_server.h"
#include "testing/kube_test_target.h"

namespace kubetrain::webhook {
namespace {

using kube::Json;
using ::testing::HasSubstr;

Json ElasticJob(const std::string& name) {
  return Json::parse(R"({
    "apiVersion": "kubetrain.io/v1alpha1", "kind": "TrainingJob",
    "metadata": {"name": ")" +
                     name + R"("},
    "spec": {
      "elasticPolicy": {"minReplicas": 2, "maxReplicas": 4},
      "replicaSpecs": {"Worker": {"replicas": 2, "restartPolicy": "ExitCode",
        "template": {"spec": {"containers": [{"name": "main", "image": "kubetrain:test"}]}}}}}})");
}

class WebhookApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<testing::KubeTestTarget>> t = testing::KubeTestTarget::Create();
    ASSERT_TRUE(t.ok()) << t.status();
    target_ = *std::move(t);
    config_name_ = absl::StrCat("kubetrain-test-", target_->ns());
    // Only this test's namespace is routed to this test's webhook (a real
    // cluster may run several such tests at once).
    ASSERT_TRUE(client()
                    .MergePatch(kube::kNamespaces, "", target_->ns(),
                                Json{{"metadata",
                                      {{"labels", {{"kubetrain-webhook-test", target_->ns()}}}}}})
                    .ok());
  }
  void TearDown() override {
    if (target_ != nullptr) {
      (void)client().Delete(kube::kValidatingWebhookConfigurations, "", config_name_);
    }
  }
  kube::KubeClient& client() { return target_->client(); }
  const std::string& ns() { return target_->ns(); }

  // The webhook on loopback with the certificate EnsureServingCert keeps in
  // `secret`, and the configuration routing trainingjobs and their scale to
  // it, its caBundle set by InjectCaBundle.
  void StartWebhook() {
    WebhookCertOptions o;
    o.ns = ns();
    o.secret_name = "kubetrain-webhook-cert";
    o.service_name = "kubetrain-webhook";
    o.extra_hosts = {"127.0.0.1"};
    absl::StatusOr<kube::ServingCert> cert = EnsureServingCert(client(), o, absl::Now(), log_);
    ASSERT_TRUE(cert.ok()) << cert.status();
    cert_ = *cert;
    kube::HttpsServerOptions https;
    https.cert_pem = cert->cert_pem;
    https.key_pem = cert->key_pem;
    absl::StatusOr<std::unique_ptr<WebhookServer>> server = WebhookServer::Start(
        https,
        [this](const std::string& job_ns,
               const std::string& name) -> absl::StatusOr<api::TrainingJob> {
          absl::StatusOr<Json> job = lookup_client_->Get(kube::kTrainingJobs, job_ns, name);
          if (!job.ok()) return job.status();
          return api::FromJson(*job);
        },
        log_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    Json config = {
        {"apiVersion", "admissionregistration.k8s.io/v1"},
        {"kind", "ValidatingWebhookConfiguration"},
        {"metadata", {{"name", config_name_}}},
        {"webhooks",
         Json::array(
             {{{"name", kWebhookName},
               {"admissionReviewVersions", {"v1"}},
               {"sideEffects", "None"},
               {"failurePolicy", "Fail"},
               {"timeoutSeconds", 10},
               {"namespaceSelector", {{"matchLabels", {{"kubetrain-webhook-test", ns()}}}}},
               {"clientConfig",
                {{"url", absl::StrCat("https://127.0.0.1:", server_->port(), kValidatePath)}}},
               {"rules", Json::array({{{"apiGroups", {"kubetrain.io"}},
                                       {"apiVersions", {"v1alpha1"}},
                                       {"operations", {"UPDATE"}},
                                       {"resources", {"trainingjobs", "trainingjobs/scale"}},
                                       {"scope", "Namespaced"}}})}}})}};
    absl::StatusOr<Json> created =
        client().Create(kube::kValidatingWebhookConfigurations, "", config);
    ASSERT_TRUE(created.ok()) << created.status();
    ASSERT_TRUE(InjectCaBundle(client(), config_name_, cert->cert_pem, log_).ok());
  }

  absl::StatusOr<Json> Scale(const std::string& name, int replicas) {
    return client().MergePatch(kube::kTrainingJobs, ns(), name,
                               Json{{"spec", {{"replicas", replicas}}}}, "scale");
  }
  int Workers(const std::string& name) {
    absl::StatusOr<Json> job = client().Get(kube::kTrainingJobs, ns(), name);
    return job.ok() ? (*job)["spec"]["replicaSpecs"]["Worker"].value("replicas", -1) : -1;
  }

  std::unique_ptr<testing::KubeTestTarget> target_;
  std::unique_ptr<kube::KubeClient> lookup_client_;
  kube::NullLogger log_;
  std::string config_name_;
  kube::ServingCert cert_;
  std::unique_ptr<WebhookServer> server_;
};

TEST_F(WebhookApiTest, TheApiServerRefusesAScaleOrAnEditOutsideTheElasticBounds) {
  absl::StatusOr<std::unique_ptr<kube::KubeClient>> lookup = target_->NewClient();
  ASSERT_TRUE(lookup.ok()) << lookup.status();
  lookup_client_ = *std::move(lookup);
  StartWebhook();
  ASSERT_TRUE(client().Create(kube::kTrainingJobs, ns(), ElasticJob("fm")).ok());

  // Within [2, 4]: the API server asks the webhook and goes on.
  absl::StatusOr<Json> up = Scale("fm", 4);
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_EQ(Workers("fm"), 4);

  // Above: refused by the API server, with the webhook's words; nothing changes.
  absl::StatusOr<Json> above = Scale("fm", 6);
  ASSERT_FALSE(above.ok());
  EXPECT_EQ(kube::KindOf(above.status()), kube::ApiErrorKind::kInvalid) << above.status();
  EXPECT_THAT(above.status().message(),
              HasSubstr("admission webhook \"validate.trainingjobs.kubetrain.io\" denied the "
                        "request: spec.replicas: Invalid value: 6: 6 is above "
                        "spec.elasticPolicy.maxReplicas 4"));
  absl::StatusOr<Json> below = Scale("fm", 1);
  ASSERT_FALSE(below.ok());
  EXPECT_THAT(below.status().message(), HasSubstr("1 is below spec.elasticPolicy.minReplicas 2"));
  EXPECT_EQ(Workers("fm"), 4);

  // An edit of the spec is checked the same way...
  absl::StatusOr<Json> job = client().Get(kube::kTrainingJobs, ns(), "fm");
  ASSERT_TRUE(job.ok());
  Json edited = *job;
  edited["spec"]["replicaSpecs"]["Worker"]["replicas"] = 5;
  absl::StatusOr<Json> refused = client().Update(kube::kTrainingJobs, edited);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("spec.replicaSpecs.Worker.replicas: Invalid value: 5: 5 is above "
                        "spec.elasticPolicy.maxReplicas 4"));
  // ...and raising maxReplicas with it is allowed.
  edited["spec"]["elasticPolicy"]["maxReplicas"] = 6;
  absl::StatusOr<Json> widened = client().Update(kube::kTrainingJobs, edited);
  ASSERT_TRUE(widened.ok()) << widened.status();
  EXPECT_EQ(Workers("fm"), 5);
  // Status writes are not the webhook's: the operator's never wait on it.
  Json status_patch = {{"status", {{"worldSize", 5}}}};
  EXPECT_TRUE(client().MergePatch(kube::kTrainingJobs, ns(), "fm", status_patch, "status").ok());
}

TEST_F(WebhookApiTest, TheCertificateIsKeptInItsSecretAndRenewedWhenItNoLongerFits) {
  WebhookCertOptions o;
  o.ns = ns();
  o.secret_name = "kubetrain-webhook-cert";
  o.service_name = "kubetrain-webhook";
  const absl::Time now = absl::Now();
  absl::StatusOr<kube::ServingCert> first = EnsureServingCert(client(), o, now, log_);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<Json> secret = client().Get(kube::kSecrets, ns(), "kubetrain-webhook-cert");
  ASSERT_TRUE(secret.ok()) << secret.status();
  EXPECT_EQ((*secret)["type"], "kubernetes.io/tls");
  std::string stored;
  ASSERT_TRUE(absl::Base64Unescape((*secret)["data"]["tls.crt"].get<std::string>(), &stored));
  EXPECT_TRUE(stored == first->cert_pem);
  EXPECT_TRUE(kube::CheckServingCert(*first, CertRequestFor(o), now, kRenewBefore).ok());

  // Another replica (or a restart) reads the same one.
  absl::StatusOr<kube::ServingCert> again = EnsureServingCert(client(), o, now, log_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->cert_pem == first->cert_pem && again->key_pem == first->key_pem);

  // A name it lacks (a new --webhook-host), or its end within kRenewBefore,
  // makes a new one, stored in the same Secret.
  o.extra_hosts = {"127.0.0.1"};
  absl::StatusOr<kube::ServingCert> renamed = EnsureServingCert(client(), o, now, log_);
  ASSERT_TRUE(renamed.ok()) << renamed.status();
  EXPECT_TRUE(renamed->cert_pem != first->cert_pem);
  EXPECT_TRUE(kube::CheckServingCert(*renamed, CertRequestFor(o), now, kRenewBefore).ok());
  const absl::Time years_later = now + absl::Hours(24 * 365 * 10) - absl::Hours(24);
  absl::StatusOr<kube::ServingCert> late = EnsureServingCert(client(), o, years_later, log_);
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_TRUE(late->cert_pem != renamed->cert_pem);
  absl::StatusOr<kube::ServingCert> reread = EnsureServingCert(client(), o, years_later, log_);
  ASSERT_TRUE(reread.ok());
  EXPECT_TRUE(reread->cert_pem == late->cert_pem) << "renewed again";
}

TEST_F(WebhookApiTest, TheCaBundleIsSetOnEveryWebhookOnceAndAMissingConfigurationIsNotFound) {
  EXPECT_TRUE(absl::IsNotFound(InjectCaBundle(client(), config_name_, "pem", log_)));
  Json webhook = {{"name", "a.kubetrain.io"},
                  {"admissionReviewVersions", {"v1"}},
                  {"sideEffects", "None"},
                  {"clientConfig", {{"url", "https://127.0.0.1:1/a"}}},
                  {"namespaceSelector", {{"matchLabels", {{"kubetrain-webhook-test", ns()}}}}},
                  {"rules", Json::array({{{"apiGroups", {"kubetrain.io"}},
                                          {"apiVersions", {"v1alpha1"}},
                                          {"operations", {"UPDATE"}},
                                          {"resources", {"trainingjobs/scale"}}}})}};
  Json second = webhook;
  second["name"] = "b.kubetrain.io";
  ASSERT_TRUE(client()
                  .Create(kube::kValidatingWebhookConfigurations, "",
                          Json{{"apiVersion", "admissionregistration.k8s.io/v1"},
                               {"kind", "ValidatingWebhookConfiguration"},
                               {"metadata", {{"name", config_name_}}},
                               {"webhooks", Json::array({webhook, second})}})
                  .ok());
  const std::string pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  ASSERT_TRUE(InjectCaBundle(client(), config_name_, pem, log_).ok());
  absl::StatusOr<Json> config =
      client().Get(kube::kValidatingWebhookConfigurations, "", config_name_);
  ASSERT_TRUE(config.ok()) << config.status();
  for (const Json& w : (*config)["webhooks"]) {
    EXPECT_EQ(w["clientConfig"]["caBundle"], absl::Base64Escape(pem)) << w["name"];
  }
  const std::string rv = (*config)["metadata"]["resourceVersion"];
  ASSERT_TRUE(InjectCaBundle(client(), config_name_, pem, log_).ok());  // nothing to change
  absl::StatusOr<Json> unchanged =
      client().Get(kube::kValidatingWebhookConfigurations, "", config_name_);
  ASSERT_TRUE(unchanged.ok());
  EXPECT_EQ((*unchanged)["metadata"]["resourceVersion"], rv);
}

}  // namespace
}  // namespace kubetrain::webhook
