// The caBundle kept set: a configuration created after the operator, or
// written again without the bundle (helm upgrade), carries it again within
// one interval. Against the API emulator or (realapi) a real server; time is
// a FakeClock, so nothing sleeps for an interval.
#include "operator/webhook/ca_bundle_keeper.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "operator/kube/resource.h"
#include "testing/kube_test_target.h"
#include "tests/support/wait_for.h"

namespace kubetrain::webhook {
namespace {

using kube::Json;
using testing_util::WaitFor;

constexpr char kPem[] = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

class CaBundleKeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<testing::KubeTestTarget>> t = testing::KubeTestTarget::Create();
    ASSERT_TRUE(t.ok()) << t.status();
    target_ = *std::move(t);
    name_ = absl::StrCat("kubetrain-keeper-", target_->ns());
  }
  void TearDown() override {
    if (target_ != nullptr) {
      (void)target_->client().Delete(kube::kValidatingWebhookConfigurations, "", name_);
    }
  }
  // The configuration as a chart writes it: no caBundle.
  Json Config() const {
    Json webhook = {{"name", "a.kubetrain.io"},
                    {"admissionReviewVersions", {"v1"}},
                    {"sideEffects", "None"},
                    {"clientConfig", {{"url", "https://127.0.0.1:1/a"}}},
                    {"namespaceSelector", {{"matchLabels", {{"kubetrain-keeper-test", "none"}}}}},
                    {"rules", Json::array({{{"apiGroups", {"kubetrain.io"}},
                                            {"apiVersions", {"v1alpha1"}},
                                            {"operations", {"UPDATE"}},
                                            {"resources", {"trainingjobs/scale"}}}})}};
    Json config = {{"apiVersion", "admissionregistration.k8s.io/v1"},
                   {"kind", "ValidatingWebhookConfiguration"},
                   {"metadata", {{"name", name_}}}};
    config["webhooks"] = Json::array();
    config["webhooks"].push_back(webhook);
    return config;
  }
  std::string Bundle() {
    absl::StatusOr<Json> c =
        target_->client().Get(kube::kValidatingWebhookConfigurations, "", name_);
    if (!c.ok()) return "<none>";
    return (*c)["webhooks"][0]["clientConfig"].value("caBundle", std::string());
  }

  std::unique_ptr<testing::KubeTestTarget> target_;
  std::string name_;
  FakeClock clock_;
  kube::NullLogger log_;
};

TEST_F(CaBundleKeeperTest, SetsTheBundleOnAConfigurationThatComesLaterOrLosesIt) {
  CaBundleKeeper keeper(target_->client(), name_, kPem, clock_, log_, absl::Seconds(10));
  EXPECT_TRUE(absl::IsNotFound(keeper.Check()));
  keeper.Start();

  ASSERT_TRUE(target_->client().Create(kube::kValidatingWebhookConfigurations, "", Config()).ok());
  const std::string want = absl::Base64Escape(kPem);
  ASSERT_TRUE(WaitFor([&] {
    clock_.AdvanceSeconds(10);
    return Bundle() == want;
  })) << Bundle();

  // Applied again as the chart has it (helm upgrade): no caBundle.
  absl::StatusOr<Json> stored =
      target_->client().Get(kube::kValidatingWebhookConfigurations, "", name_);
  ASSERT_TRUE(stored.ok());
  Json again = Config();
  again["metadata"]["resourceVersion"] = (*stored)["metadata"]["resourceVersion"];
  ASSERT_TRUE(target_->client().Update(kube::kValidatingWebhookConfigurations, again).ok());
  ASSERT_EQ(Bundle(), "");
  ASSERT_TRUE(WaitFor([&] {
    clock_.AdvanceSeconds(10);
    return Bundle() == want;
  })) << Bundle();
  EXPECT_TRUE(keeper.Check().ok());
}

}  // namespace
}  // namespace kubetrain::webhook
