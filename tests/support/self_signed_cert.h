// A self-signed certificate for 127.0.0.1 (kube::GenerateServingCert) and
// its key, in memory or written as cert.pem and key.pem in a test's folder:
// what a TLS server under test (kube::HttpsServer, the node agent's kubelet
// endpoint, a webhook) serves with. Header-only; the test links
// kubetrain::kube.
#ifndef KUBETRAIN_TESTS_SUPPORT_SELF_SIGNED_CERT_H_
#define KUBETRAIN_TESTS_SUPPORT_SELF_SIGNED_CERT_H_

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "absl/time/clock.h"
#include "operator/kube/serving_cert.h"
#include "tests/support/temp_files.h"

namespace kubetrain::testing_util {

// A certificate for `name` (its common and DNS name) and 127.0.0.1, valid
// for an hour from now.
inline absl::StatusOr<kube::ServingCert> SelfSignedCert(const std::string& name) {
  kube::ServingCertRequest request;
  request.common_name = name;
  request.dns_names = {name};
  request.ip_addresses = {"127.0.0.1"};
  request.validity = absl::Hours(1);
  return kube::GenerateServingCert(request, absl::Now());
}

// Writes dir/cert.pem and dir/key.pem; a failed step fails the test.
inline void WriteSelfSignedCert(const data::testing_util::TempDir& dir) {
  absl::StatusOr<kube::ServingCert> cert = SelfSignedCert("kubetrain-node");
  ASSERT_TRUE(cert.ok()) << cert.status();
  std::ofstream(dir.File("cert.pem")) << cert->cert_pem;
  std::ofstream(dir.File("key.pem")) << cert->key_pem;
}

}  // namespace kubetrain::testing_util

#endif  // KUBETRAIN_TESTS_SUPPORT_SELF_SIGNED_CERT_H_
