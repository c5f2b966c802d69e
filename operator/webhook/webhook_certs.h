// The webhook's serving certificate, managed by the operator itself (as
// Kueue's internal cert management, so a cluster needs no cert-manager):
// kept in a Secret of type kubernetes.io/tls in the operator's namespace
// (tls.crt, tls.key, ca.crt), made when absent or no longer good for the
// names asked (a missing name, or expiring within kRenewBefore), and
// published as the caBundle of every webhook in the
// ValidatingWebhookConfiguration that routes to it. Replicas of the operator
// share the Secret: the loser of a create race reads the winner's.
//
// With --webhook-cert-dir (tls.crt and tls.key mounted from cert-manager or
// elsewhere) none of this runs; whoever made the certificate publishes its
// CA.
//
// Functions over a KubeClient; thread-safe as it is.
#ifndef KUBETRAIN_OPERATOR_WEBHOOK_WEBHOOK_CERTS_H_
#define KUBETRAIN_OPERATOR_WEBHOOK_WEBHOOK_CERTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/logger.h"
#include "operator/kube/serving_cert.h"

namespace kubetrain::webhook {

inline constexpr absl::Duration kRenewBefore = absl::Hours(24 * 30);

struct WebhookCertOptions {
  std::string ns;            // the operator's namespace: the Secret's
  std::string secret_name;   // "kubetrain-webhook-cert"
  std::string service_name;  // the webhook's Service: <svc>.<ns>.svc[.cluster.local] are named
  // More names: IP addresses or DNS names ("127.0.0.1" for a configuration
  // that calls a url on loopback, as scripts/local-cluster.sh's).
  std::vector<std::string> extra_hosts;
};

// The names the certificate must carry for `options`.
kube::ServingCertRequest CertRequestFor(const WebhookCertOptions& options);

// The certificate from the Secret, made (and stored) when there is none or
// it is no longer good at `now`.
absl::StatusOr<kube::ServingCert> EnsureServingCert(kube::KubeClient& client,
                                                    const WebhookCertOptions& options,
                                                    absl::Time now, kube::Logger& log);

// Sets clientConfig.caBundle of every webhook in the
// ValidatingWebhookConfiguration `config_name` to `ca_pem`, when one differs
// (an update with the read resourceVersion, retried on a conflict).
// NotFound when there is no such configuration.
absl::Status InjectCaBundle(kube::KubeClient& client, const std::string& config_name,
                            const std::string& ca_pem, kube::Logger& log);

}  // namespace kubetrain::webhook

#endif  // KUBETRAIN_OPERATOR_WEBHOOK_WEBHOOK_CERTS_H_
