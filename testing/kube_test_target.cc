#include "testing/kube_test_target.h"

#include <cstdlib>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "operator/kube/api_error.h"
#include "operator/kube/cpprest_transport.h"

namespace kubetrain::testing {

absl::StatusOr<std::unique_ptr<KubeTestTarget>> KubeTestTarget::Create(
    const KubeEmulatorOptions& options) {
  std::unique_ptr<KubeTestTarget> target(new KubeTestTarget());
  const char* kubeconfig = std::getenv("KUBETRAIN_TEST_KUBECONFIG");
  if (kubeconfig != nullptr && *kubeconfig != '\0') {
    absl::StatusOr<kube::KubeConfig> config =
        kube::LoadKubeConfigFile(kubeconfig, "", target->env_);
    if (!config.ok()) return config.status();
    target->config_ = *std::move(config);
  } else {
    absl::StatusOr<std::unique_ptr<KubeEmulator>> emulator = KubeEmulator::Start(options);
    if (!emulator.ok()) return emulator.status();
    target->emulator_ = *std::move(emulator);
    target->config_.server = target->emulator_->Url();
    target->config_.token = options.token;
    target->config_.source = "emulator";
  }
  absl::StatusOr<std::unique_ptr<kube::KubeClient>> client = target->NewClient();
  if (!client.ok()) return client.status();
  target->client_ = *std::move(client);

  absl::BitGen gen;
  static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  target->ns_ = "kt-";
  for (int i = 0; i < 6; ++i) target->ns_.push_back(kAlnum[absl::Uniform(gen, 0, 36)]);
  absl::StatusOr<kube::Json> created = target->client_->Create(
      kube::kNamespaces, "", kube::Json{{"metadata", {{"name", target->ns_}}}});
  if (!created.ok()) return created.status();
  return target;
}

KubeTestTarget::~KubeTestTarget() {
  if (emulator_ == nullptr && client_ != nullptr) {
    (void)client_->Delete(kube::kNamespaces, "", ns_);
  }
}

absl::StatusOr<std::unique_ptr<kube::HttpTransport>> KubeTestTarget::NewTransport() const {
  absl::StatusOr<std::unique_ptr<kube::CpprestTransport>> transport =
      kube::CpprestTransport::Create(config_, {}, env_, clock_);
  if (!transport.ok()) return transport.status();
  return std::unique_ptr<kube::HttpTransport>(*std::move(transport));
}

absl::StatusOr<std::unique_ptr<kube::KubeClient>> KubeTestTarget::NewClient(
    kube::RetryPolicy retry) const {
  absl::StatusOr<std::unique_ptr<kube::HttpTransport>> transport = NewTransport();
  if (!transport.ok()) return transport.status();
  return std::make_unique<kube::KubeClient>(*std::move(transport), retry);
}

}  // namespace kubetrain::testing
