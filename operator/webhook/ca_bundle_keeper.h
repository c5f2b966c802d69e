// CaBundleKeeper: keeps the operator's certificate as the caBundle of the
// ValidatingWebhookConfiguration, checking now and every `interval` on a
// thread of its own (as Kueue's cert controller watches its configurations):
// the configuration may be created after the operator starts (Helm and
// kustomize apply it after the Deployment), and `helm upgrade` or
// `kubectl apply` of the manifests writes it again without a caBundle. With
// failurePolicy Fail either would refuse every TrainingJob update until the
// operator restarted; here the bundle is back within one interval.
//
// Thread-safe. Destruction stops the thread (a check in flight finishes).
#ifndef KUBETRAIN_OPERATOR_WEBHOOK_CA_BUNDLE_KEEPER_H_
#define KUBETRAIN_OPERATOR_WEBHOOK_CA_BUNDLE_KEEPER_H_

#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "operator/kube/clock_waiter.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/logger.h"

namespace kubetrain::webhook {

class CaBundleKeeper {
 public:
  // Borrows `client`, `clock` and `log`, which must outlive it.
  CaBundleKeeper(kube::KubeClient& client, std::string config_name, std::string ca_pem,
                 const Clock& clock, kube::Logger& log, absl::Duration interval);
  ~CaBundleKeeper();
  CaBundleKeeper(const CaBundleKeeper&) = delete;
  CaBundleKeeper& operator=(const CaBundleKeeper&) = delete;

  // One check: sets the bundle where it differs. A missing configuration
  // (NotFound) or a failed request is logged once until it changes, and
  // returned.
  absl::Status Check();
  // Checks now, then every interval, until destroyed.
  void Start();

 private:
  void Run();

  kube::KubeClient& client_;
  const std::string config_name_;
  const std::string ca_pem_;
  const Clock& clock_;
  kube::Logger& log_;
  const absl::Duration interval_;
  absl::Mutex mu_;
  kube::ClockWaiter waiter_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::string last_problem_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace kubetrain::webhook

#endif  // KUBETRAIN_OPERATOR_WEBHOOK_CA_BUNDLE_KEEPER_H_
