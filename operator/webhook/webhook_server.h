// The operator's validating admission webhook: kube-apiserver POSTs an
// AdmissionReview for each write a ValidatingWebhookConfiguration routes here
// (UPDATE of trainingjobs and trainingjobs/scale) to kValidatePath over
// HTTPS, verifying the certificate against the configuration's caBundle
// (webhook_certs.h makes and publishes one), and the answer says whether the
// write goes through (elastic_admission.h).
//
// Admit is the exchange without HTTP, for the API emulator's in-process
// webhooks; WebhookServer serves it on kube::HttpsServer: POST kValidatePath
// -> 200 with the AdmissionReview answer; a body that is no AdmissionReview
// -> 400; another path -> 404; another method -> 405 (kube-apiserver counts
// any non-200 as the webhook failing and applies the failurePolicy).
//
// Thread-safe: each request runs on its own connection's thread, and
// `lookup` must be thread-safe.
#ifndef KUBETRAIN_OPERATOR_WEBHOOK_WEBHOOK_SERVER_H_
#define KUBETRAIN_OPERATOR_WEBHOOK_WEBHOOK_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "operator/kube/https_server.h"
#include "operator/kube/logger.h"
#include "operator/webhook/elastic_admission.h"

namespace kubetrain::webhook {

// controller-runtime's path for a validating webhook of this kind.
inline constexpr char kValidatePath[] = "/validate-kubetrain-io-v1alpha1-trainingjob";
// The webhook's name in the configuration (kube-apiserver quotes it in a
// refusal: admission webhook "validate.trainingjobs.kubetrain.io" denied ...).
inline constexpr char kWebhookName[] = "validate.trainingjobs.kubetrain.io";

// The AdmissionReview answer to `review` (a request's body);
// InvalidArgument when it is no admission.k8s.io/v1 AdmissionReview.
// Refusals are logged at info level, with the object and why.
absl::StatusOr<nlohmann::json> Admit(const std::string& review, const JobLookup& lookup,
                                     kube::Logger& log);

class WebhookServer {
 public:
  // Serves on `options` (address and certificate) until destroyed. `log`
  // outlives the server.
  static absl::StatusOr<std::unique_ptr<WebhookServer>> Start(
      const kube::HttpsServerOptions& options, JobLookup lookup, kube::Logger& log);
  int port() const { return server_->port(); }

 private:
  WebhookServer() = default;
  std::unique_ptr<kube::HttpsServer> server_;
};

}  // namespace kubetrain::webhook

#endif  // KUBETRAIN_OPERATOR_WEBHOOK_WEBHOOK_SERVER_H_
