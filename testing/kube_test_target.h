// KubeTestTarget: the Kubernetes API a test talks to. By default an
// in-process KubeEmulator; when KUBETRAIN_TEST_KUBECONFIG names a
// kubeconfig, that real cluster instead (the TrainingJob and Volcano
// PodGroup CRDs must be installed there; the `realapi` CTest label starts
// such a control plane), so the same tests run against both.
//
// Each target works in a namespace of its own ("kt-<random>"), created at
// start and deleted at the end on a real cluster. Tests that need fault
// injection call KT_REQUIRE_EMULATOR and skip against a real cluster.
// Thread-safe after Create.
#ifndef KUBETRAIN_TESTING_KUBE_TEST_TARGET_H_
#define KUBETRAIN_TESTING_KUBE_TEST_TARGET_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/kube_config.h"
#include "testing/kube_emulator.h"

namespace kubetrain::testing {

class KubeTestTarget {
 public:
  static absl::StatusOr<std::unique_ptr<KubeTestTarget>> Create(
      const KubeEmulatorOptions& options = {});
  ~KubeTestTarget();

  kube::KubeClient& client() { return *client_; }
  // Another client with its own connections (a second operator, a racer).
  absl::StatusOr<std::unique_ptr<kube::KubeClient>> NewClient(kube::RetryPolicy retry = {}) const;
  // A bare transport on its own connections, for tests that read raw answers
  // (a 422's details.causes).
  absl::StatusOr<std::unique_ptr<kube::HttpTransport>> NewTransport() const;
  // The transport config, for tests that wrap transports themselves.
  const kube::KubeConfig& config() const { return config_; }
  // Null against a real cluster.
  KubeEmulator* emulator() { return emulator_.get(); }
  bool real_cluster() const { return emulator_ == nullptr; }
  const std::string& ns() const { return ns_; }

 private:
  KubeTestTarget() = default;

  std::unique_ptr<KubeEmulator> emulator_;
  kube::KubeConfig config_;
  kube::RealConfigEnvironment env_;
  RealClock clock_;
  std::unique_ptr<kube::KubeClient> client_;
  std::string ns_;
};

}  // namespace kubetrain::testing

#define KT_REQUIRE_EMULATOR(target)                                                        \
  if ((target)->emulator() == nullptr) {                                                   \
    GTEST_SKIP() << "needs the API emulator's fault injection; skipped on a real cluster"; \
  }

#endif  // KUBETRAIN_TESTING_KUBE_TEST_TARGET_H_
