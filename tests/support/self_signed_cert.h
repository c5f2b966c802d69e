// A self-signed certificate for 127.0.0.1 (kube::GenerateServingCert) and
// its key, written as cert.pem and key.pem in a test's folder: what a TLS
// server under test (kube::HttpsServer, the node agent's kubelet endpoint)
// serves with. Header-only; the test links kubetrain::kube.
#ifndef KUBETRAIN_TESTS_SUPPORT_SELF_SIGNED_CERT_H_
#define KUBETRAIN_TESTS_SUPPORT_SELF_SIGNED_CERT_H_

#include <gtest/gtest.h>

#include <fstream>

#include "absl/time/clock.h"
#include "operator/kube/serving_cert.h"
#include "tests/support/temp_files.h"

namespace kubetrain::testing_util {

// Writes dir/cert.pem and dir/key.pem; a failed step fails the test.
inline void WriteSelfSignedCert(const data::testing_util::TempDir& dir) {
  kube::ServingCertRequest request;
  request.common_name = "kubetrain-node";
  request.ip_addresses = {"127.0.0.1"};
  request.validity = absl::Hours(1);
  absl::StatusOr<kube::ServingCert> cert = kube::GenerateServingCert(request, absl::Now());
  ASSERT_TRUE(cert.ok()) << cert.status();
  std::ofstream(dir.File("cert.pem")) << cert->cert_pem;
  std::ofstream(dir.File("key.pem")) << cert->key_pem;
}

}  // namespace kubetrain::testing_util

#endif  // KUBETRAIN_TESTS_SUPPORT_SELF_SIGNED_CERT_H_
