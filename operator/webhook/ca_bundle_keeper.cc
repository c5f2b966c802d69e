#include "operator/webhook/ca_bundle_keeper.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "operator/webhook/webhook_certs.h"

namespace kubetrain::webhook {

CaBundleKeeper::CaBundleKeeper(kube::KubeClient& client, std::string config_name,
                               std::string ca_pem, const Clock& clock, kube::Logger& log,
                               absl::Duration interval)
    : client_(client),
      config_name_(std::move(config_name)),
      ca_pem_(std::move(ca_pem)),
      clock_(clock),
      log_(log),
      interval_(interval),
      waiter_(clock, &mu_) {}

CaBundleKeeper::~CaBundleKeeper() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    waiter_.Wake(mu_);
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status CaBundleKeeper::Check() {
  absl::Status s = InjectCaBundle(client_, config_name_, ca_pem_, log_);
  std::string problem;
  if (absl::IsNotFound(s)) {
    problem =
        absl::StrCat("no validatingwebhookconfiguration ", config_name_,
                     " (yet): the API server does not call the webhook; checking again every ",
                     absl::FormatDuration(interval_));
  } else if (!s.ok()) {
    problem = absl::StrCat("cannot set the caBundle: ", s.message(), "; trying again every ",
                           absl::FormatDuration(interval_));
  }
  absl::MutexLock lock(&mu_);
  if (problem != last_problem_) {
    if (!problem.empty()) {
      log_.Warning("webhook", problem);
    } else if (!last_problem_.empty()) {
      log_.Info("webhook", absl::StrCat("validatingwebhookconfiguration ", config_name_,
                                        " carries this operator's caBundle"));
    }
    last_problem_ = problem;
  }
  return s;
}

void CaBundleKeeper::Start() {
  thread_ = std::thread([this] { Run(); });
}

void CaBundleKeeper::Run() {
  for (;;) {
    (void)Check();
    absl::MutexLock lock(&mu_);
    waiter_.AwaitFor(
        mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; }, interval_);
    if (stopping_) return;
  }
}

}  // namespace kubetrain::webhook
