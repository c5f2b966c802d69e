// A self-signed EC certificate (CN kubetrain-node, valid an hour) and its
// key, written as cert.pem and key.pem in a test's folder: what a TLS server
// under test (the node agent's kubelet endpoint) serves with. Header-only;
// the test links OpenSSL's libcrypto.
#ifndef KUBETRAIN_TESTS_SUPPORT_SELF_SIGNED_CERT_H_
#define KUBETRAIN_TESTS_SUPPORT_SELF_SIGNED_CERT_H_

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdio>

#include "tests/support/temp_files.h"

namespace kubetrain::testing_util {

// Writes dir/cert.pem and dir/key.pem; a failed step fails the test.
inline void WriteSelfSignedCert(const data::testing_util::TempDir& dir) {
  EVP_PKEY* key = EVP_EC_gen("prime256v1");
  ASSERT_NE(key, nullptr);
  X509* cert = X509_new();
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("kubetrain-node"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  ASSERT_GT(X509_sign(cert, key, EVP_sha256()), 0);
  FILE* c = fopen(dir.File("cert.pem").c_str(), "w");
  FILE* k = fopen(dir.File("key.pem").c_str(), "w");
  ASSERT_TRUE(c != nullptr && k != nullptr);
  PEM_write_X509(c, cert);
  PEM_write_PrivateKey(k, key, nullptr, nullptr, 0, nullptr, nullptr);
  fclose(c);
  fclose(k);
  X509_free(cert);
  EVP_PKEY_free(key);
}

}  // namespace kubetrain::testing_util

#endif  // KUBETRAIN_TESTS_SUPPORT_SELF_SIGNED_CERT_H_
