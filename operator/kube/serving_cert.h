// The validating admission webhook's serving certificate: the operator serves
// HTTPS to kube-apiserver with a self-signed certificate it generates itself
// (as Kueue's internal cert management does), keeps in a Secret, and puts in
// the ValidatingWebhookConfiguration's caBundle. The certificate is its own
// CA, so the same PEM is both what the server presents and the root that
// verifies it (Go's crypto/x509, which kube-apiserver uses, accepts a leaf
// that is itself among the roots).
//
// Plain functions over values with no shared state: thread-safe.
#ifndef KUBETRAIN_OPERATOR_KUBE_SERVING_CERT_H_
#define KUBETRAIN_OPERATOR_KUBE_SERVING_CERT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kubetrain::kube {

// A PEM certificate and its PEM private key.
struct ServingCert {
  std::string cert_pem;  // "-----BEGIN CERTIFICATE-----..."
  std::string key_pem;   // "-----BEGIN PRIVATE KEY-----..." (PKCS#8)
};

struct ServingCertRequest {
  // e.g. "kubetrain-webhook.kubetrain-system.svc"; at most 64 characters.
  // Empty: the first DNS name (or IP address). Clients ignore it: Go matches
  // only the subjectAltName entries below.
  std::string common_name;
  std::vector<std::string> dns_names;     // subjectAltName DNS entries
  std::vector<std::string> ip_addresses;  // subjectAltName IP entries ("127.0.0.1", "::1")
  absl::Duration validity = absl::Hours(24 * 365 * 10);
};

// A self-signed certificate (its own CA: basicConstraints CA:TRUE, keyUsage
// digitalSignature+keyEncipherment+keyCertSign, extendedKeyUsage serverAuth,
// a random 128-bit serial, notBefore an hour before `now` for clock skew,
// notAfter `now + validity`, signed with SHA-256) with a fresh ECDSA P-256
// key. InvalidArgument for a bad IP address text, an empty or malformed DNS
// name, no subjectAltName at all (Go refuses to match a certificate by its
// common name), a common name over 64 characters or a validity that is not
// positive; Internal for an OpenSSL failure (with OpenSSL's error text).
absl::StatusOr<ServingCert> GenerateServingCert(const ServingCertRequest& request, absl::Time now);

// OK when `cert` parses, its key matches its certificate, every name in
// `request.dns_names`/`request.ip_addresses` is among its subjectAltNames (DNS
// names compared case-insensitively, IP addresses as addresses), and it is
// valid from `now` until at least `now + min_remaining`. Otherwise
// FailedPrecondition saying which, every problem found ("key does not match
// the certificate", "expires at ...", "not valid before ...", "no
// subjectAltName DNS:<name>") so the caller regenerates; InvalidArgument when
// a PEM does not parse or a requested IP address is not one.
absl::Status CheckServingCert(const ServingCert& cert, const ServingCertRequest& request,
                              absl::Time now, absl::Duration min_remaining);

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_OPERATOR_KUBE_SERVING_CERT_H_
