// The webhook's self-signed serving certificate: what it says (extensions,
// names, validity, key), that OpenSSL verifies it with itself as the only
// root, that a real TLS handshake over a socketpair succeeds against it and
// fails against another root or name, and CheckServingCert's verdicts.
#include "operator/kube/serving_cert.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "operator/kube/openssl_ptr.h"

namespace kubetrain::kube {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

using X509Ptr = OpensslPtr<X509, X509_free>;
using PkeyPtr = OpensslPtr<EVP_PKEY, EVP_PKEY_free>;
using StorePtr = OpensslPtr<X509_STORE, X509_STORE_free>;
using StoreCtxPtr = OpensslPtr<X509_STORE_CTX, X509_STORE_CTX_free>;
using SslCtxPtr = OpensslPtr<SSL_CTX, SSL_CTX_free>;
using SslPtr = OpensslPtr<SSL, SSL_free>;
using BignumPtr = OpensslPtr<BIGNUM, BN_free>;

const absl::Time kNow =
    absl::FromCivil(absl::CivilSecond(2026, 6, 1, 12, 0, 0), absl::UTCTimeZone());

ServingCertRequest WebhookRequest() {
  ServingCertRequest request;
  request.common_name = "kubetrain-webhook.kubetrain-system.svc";
  request.dns_names = {"kubetrain-webhook", "kubetrain-webhook.kubetrain-system",
                       "kubetrain-webhook.kubetrain-system.svc",
                       "kubetrain-webhook.kubetrain-system.svc.cluster.local"};
  request.ip_addresses = {"127.0.0.1", "::1"};
  return request;
}

X509Ptr ReadCert(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  return X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

PkeyPtr ReadKey(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  return PkeyPtr(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
}

absl::Time ToTime(const ASN1_TIME* t) {
  struct tm tm = {};
  EXPECT_EQ(ASN1_TIME_to_tm(t, &tm), 1);
  return absl::FromTM(tm, absl::UTCTimeZone());
}

// X509_verify_cert of `cert` with `root_pem` the only trusted certificate,
// for a TLS server, at `at`. X509_V_OK or the error.
int VerifyAgainst(X509* cert, const std::string& root_pem, absl::Time at) {
  X509Ptr root = ReadCert(root_pem);
  EXPECT_TRUE(root);
  StorePtr store(X509_STORE_new());
  EXPECT_EQ(X509_STORE_add_cert(store.get(), root.get()), 1);
  StoreCtxPtr ctx(X509_STORE_CTX_new());
  EXPECT_EQ(X509_STORE_CTX_init(ctx.get(), store.get(), cert, nullptr), 1);
  EXPECT_EQ(X509_STORE_CTX_set_purpose(ctx.get(), X509_PURPOSE_SSL_SERVER), 1);
  X509_STORE_CTX_set_time(ctx.get(), 0, absl::ToTimeT(at));
  if (X509_verify_cert(ctx.get()) == 1) return X509_V_OK;
  return X509_STORE_CTX_get_error(ctx.get());
}

TEST(GenerateServingCertTest, SaysWhatTheWebhookNeeds) {
  const ServingCertRequest request = WebhookRequest();
  absl::StatusOr<ServingCert> cert = GenerateServingCert(request, kNow);
  ASSERT_TRUE(cert.ok()) << cert.status();
  EXPECT_THAT(cert->cert_pem, StartsWith("-----BEGIN CERTIFICATE-----\n"));
  EXPECT_THAT(cert->key_pem, StartsWith("-----BEGIN PRIVATE KEY-----\n"));  // PKCS#8

  X509Ptr x509 = ReadCert(cert->cert_pem);
  ASSERT_TRUE(x509);
  EXPECT_EQ(X509_get_version(x509.get()), X509_VERSION_3);
  // Self-signed: issued by itself, and its signature verifies with its key.
  EXPECT_EQ(X509_check_issued(x509.get(), x509.get()), X509_V_OK);
  EXPECT_EQ(X509_self_signed(x509.get(), /*verify_signature=*/1), 1);
  EXPECT_EQ(X509_get_signature_nid(x509.get()), NID_ecdsa_with_SHA256);

  char cn[128] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(x509.get()), NID_commonName, cn, sizeof cn);
  EXPECT_EQ(std::string(cn), request.common_name);

  // Its own CA, for serving.
  const uint32_t flags = X509_get_extension_flags(x509.get());
  EXPECT_TRUE(flags & EXFLAG_CA);
  for (int nid : {NID_basic_constraints, NID_key_usage}) {
    const int at = X509_get_ext_by_NID(x509.get(), nid, -1);
    ASSERT_GE(at, 0) << OBJ_nid2sn(nid);
    EXPECT_EQ(X509_EXTENSION_get_critical(X509_get_ext(x509.get(), at)), 1) << OBJ_nid2sn(nid);
  }
  EXPECT_GE(X509_get_ext_by_NID(x509.get(), NID_authority_key_identifier, -1), 0);
  EXPECT_EQ(X509_get_key_usage(x509.get()),
            static_cast<uint32_t>(KU_DIGITAL_SIGNATURE | KU_KEY_ENCIPHERMENT | KU_KEY_CERT_SIGN));
  EXPECT_EQ(X509_get_extended_key_usage(x509.get()), static_cast<uint32_t>(XKU_SSL_SERVER));
  EXPECT_NE(X509_get0_subject_key_id(x509.get()), nullptr);

  // An hour of clock skew before `now`, `validity` after it.
  EXPECT_EQ(ToTime(X509_get0_notBefore(x509.get())), kNow - absl::Hours(1));
  EXPECT_EQ(ToTime(X509_get0_notAfter(x509.get())), kNow + request.validity);

  // A positive serial of at most 128 bits.
  BignumPtr serial(ASN1_INTEGER_to_BN(X509_get0_serialNumber(x509.get()), nullptr));
  ASSERT_TRUE(serial);
  EXPECT_FALSE(BN_is_negative(serial.get()));
  EXPECT_FALSE(BN_is_zero(serial.get()));
  EXPECT_LE(BN_num_bits(serial.get()), 128);

  // An ECDSA P-256 key that is the certificate's.
  PkeyPtr key = ReadKey(cert->key_pem);
  ASSERT_TRUE(key);
  EXPECT_TRUE(EVP_PKEY_is_a(key.get(), "EC"));
  char group[64] = {};
  size_t group_len = 0;
  ASSERT_EQ(EVP_PKEY_get_group_name(key.get(), group, sizeof group, &group_len), 1);
  EXPECT_EQ(std::string(group, group_len), "prime256v1");
  EXPECT_EQ(X509_check_private_key(x509.get(), key.get()), 1);
}

TEST(GenerateServingCertTest, EachCertificateHasItsOwnSerialAndKey) {
  absl::StatusOr<ServingCert> a = GenerateServingCert(WebhookRequest(), kNow);
  absl::StatusOr<ServingCert> b = GenerateServingCert(WebhookRequest(), kNow);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  X509Ptr xa = ReadCert(a->cert_pem);
  X509Ptr xb = ReadCert(b->cert_pem);
  ASSERT_TRUE(xa && xb);
  EXPECT_NE(ASN1_INTEGER_cmp(X509_get0_serialNumber(xa.get()), X509_get0_serialNumber(xb.get())),
            0);
  EXPECT_NE(a->key_pem, b->key_pem);
}

TEST(GenerateServingCertTest, VerifiesWithItselfAsTheOnlyRootForEachRequestedName) {
  const ServingCertRequest request = WebhookRequest();
  absl::StatusOr<ServingCert> cert = GenerateServingCert(request, kNow);
  ASSERT_TRUE(cert.ok()) << cert.status();
  X509Ptr x509 = ReadCert(cert->cert_pem);
  ASSERT_TRUE(x509);

  EXPECT_EQ(VerifyAgainst(x509.get(), cert->cert_pem, kNow), X509_V_OK);
  // Within the hour of skew before `now`, and just before it expires.
  EXPECT_EQ(VerifyAgainst(x509.get(), cert->cert_pem, kNow - absl::Minutes(59)), X509_V_OK);
  EXPECT_EQ(VerifyAgainst(x509.get(), cert->cert_pem, kNow + request.validity - absl::Minutes(1)),
            X509_V_OK);
  EXPECT_EQ(VerifyAgainst(x509.get(), cert->cert_pem, kNow - absl::Hours(2)),
            X509_V_ERR_CERT_NOT_YET_VALID);
  EXPECT_EQ(VerifyAgainst(x509.get(), cert->cert_pem, kNow + request.validity + absl::Minutes(1)),
            X509_V_ERR_CERT_HAS_EXPIRED);

  // Another self-signed certificate with the same names is no root for it.
  absl::StatusOr<ServingCert> other = GenerateServingCert(request, kNow);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(VerifyAgainst(x509.get(), other->cert_pem, kNow), X509_V_OK);

  for (const std::string& name : request.dns_names) {
    EXPECT_EQ(X509_check_host(x509.get(), name.data(), name.size(),
                              X509_CHECK_FLAG_NEVER_CHECK_SUBJECT, nullptr),
              1)
        << name;
  }
  for (const std::string& ip : request.ip_addresses) {
    EXPECT_EQ(X509_check_ip_asc(x509.get(), ip.c_str(), 0), 1) << ip;
  }
  EXPECT_EQ(X509_check_host(x509.get(), "other.kubetrain-system.svc", 0, 0, nullptr), 0);
  EXPECT_EQ(X509_check_host(x509.get(), "kubetrain-webhook.default.svc", 0, 0, nullptr), 0);
  EXPECT_EQ(X509_check_ip_asc(x509.get(), "10.0.0.1", 0), 0);
  EXPECT_EQ(X509_check_ip_asc(x509.get(), "::2", 0), 0);
}

TEST(GenerateServingCertTest, CommonNameDefaultsToTheFirstName) {
  ServingCertRequest request;
  request.dns_names = {"a.example.svc", "b.example.svc"};
  absl::StatusOr<ServingCert> cert = GenerateServingCert(request, kNow);
  ASSERT_TRUE(cert.ok()) << cert.status();
  X509Ptr x509 = ReadCert(cert->cert_pem);
  ASSERT_TRUE(x509);
  char cn[128] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(x509.get()), NID_commonName, cn, sizeof cn);
  EXPECT_EQ(std::string(cn), "a.example.svc");

  ServingCertRequest ip_only;
  ip_only.ip_addresses = {"10.96.0.12"};
  cert = GenerateServingCert(ip_only, kNow);
  ASSERT_TRUE(cert.ok()) << cert.status();
  x509 = ReadCert(cert->cert_pem);
  ASSERT_TRUE(x509);
  X509_NAME_get_text_by_NID(X509_get_subject_name(x509.get()), NID_commonName, cn, sizeof cn);
  EXPECT_EQ(std::string(cn), "10.96.0.12");
  EXPECT_EQ(X509_check_ip_asc(x509.get(), "10.96.0.12", 0), 1);
}

TEST(GenerateServingCertTest, RefusesBadRequests) {
  for (const char* bad_ip :
       {"not-an-ip", "256.0.0.1", "1.2.3", "1.2.3.4.5", " 1.2.3.4", "1.2.3.4 ", "::g", ""}) {
    ServingCertRequest request = WebhookRequest();
    request.ip_addresses.push_back(bad_ip);
    absl::StatusOr<ServingCert> cert = GenerateServingCert(request, kNow);
    EXPECT_EQ(cert.status().code(), absl::StatusCode::kInvalidArgument) << "\"" << bad_ip << "\"";
    EXPECT_THAT(std::string(cert.status().message()), HasSubstr("not an IP address")) << bad_ip;
  }

  ServingCertRequest no_names;
  EXPECT_EQ(GenerateServingCert(no_names, kNow).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A common name alone is no name to a Go client.
  no_names.common_name = "kubetrain-webhook.kubetrain-system.svc";
  EXPECT_EQ(GenerateServingCert(no_names, kNow).status().code(),
            absl::StatusCode::kInvalidArgument);

  // A comma would be syntax in OpenSSL's "DNS:a,IP:b" text; here it is a typo.
  for (const char* bad_dns : {"", "a b.svc", "a.svc,IP:10.0.0.1", "caf\xc3\xa9.svc"}) {
    ServingCertRequest request = WebhookRequest();
    request.dns_names.push_back(bad_dns);
    EXPECT_EQ(GenerateServingCert(request, kNow).status().code(),
              absl::StatusCode::kInvalidArgument)
        << "\"" << bad_dns << "\"";
  }

  ServingCertRequest long_cn = WebhookRequest();
  long_cn.common_name = std::string(65, 'a');
  EXPECT_EQ(GenerateServingCert(long_cn, kNow).status().code(), absl::StatusCode::kInvalidArgument);

  for (absl::Duration validity : {absl::ZeroDuration(), -absl::Hours(1), absl::InfiniteDuration(),
                                  absl::Hours(24 * 366 * 8000)}) {
    ServingCertRequest request = WebhookRequest();
    request.validity = validity;
    EXPECT_EQ(GenerateServingCert(request, kNow).status().code(),
              absl::StatusCode::kInvalidArgument)
        << validity;
  }
}

// --- a TLS handshake over a socketpair ---

struct HandshakeResult {
  bool client_ok = false;
  bool server_ok = false;
  long verify_result = -1;  // NOLINT(runtime/int): OpenSSL's type
  std::string reply;        // what the server answered "ping" with
};

// The server presents `served`; the client trusts only `trusted_pem`, asks
// for SSL_VERIFY_PEER and checks the peer against `host` (an IP address
// when `host_is_ip`), as kube-apiserver calls a webhook with its caBundle.
HandshakeResult Handshake(const ServingCert& served, const std::string& trusted_pem,
                          const std::string& host, bool host_is_ip) {
  // A side that fails closes its end; the other must not die of SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  HandshakeResult result;
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    ADD_FAILURE() << "socketpair";
    return result;
  }
  // A guard against a hang if either side never answers: no test waits on it.
  timeval guard{30, 0};
  for (int fd : fds) {
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &guard, sizeof guard);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &guard, sizeof guard);
  }

  SslCtxPtr server_ctx(SSL_CTX_new(TLS_server_method()));
  X509Ptr server_cert = ReadCert(served.cert_pem);
  PkeyPtr server_key = ReadKey(served.key_pem);
  EXPECT_TRUE(server_ctx && server_cert && server_key);
  EXPECT_EQ(SSL_CTX_use_certificate(server_ctx.get(), server_cert.get()), 1);
  EXPECT_EQ(SSL_CTX_use_PrivateKey(server_ctx.get(), server_key.get()), 1);
  EXPECT_EQ(SSL_CTX_check_private_key(server_ctx.get()), 1);

  std::thread server([&result, &server_ctx, fd = fds[0]] {
    SslPtr ssl(SSL_new(server_ctx.get()));
    SSL_set_fd(ssl.get(), fd);
    if (SSL_accept(ssl.get()) == 1) {
      result.server_ok = true;
      char buf[4];
      if (SSL_read(ssl.get(), buf, sizeof buf) == 4 && std::string(buf, 4) == "ping") {
        SSL_write(ssl.get(), "pong", 4);
      }
      SSL_shutdown(ssl.get());
    }
    shutdown(fd, SHUT_RDWR);
  });

  SslCtxPtr client_ctx(SSL_CTX_new(TLS_client_method()));
  X509Ptr trusted = ReadCert(trusted_pem);
  EXPECT_TRUE(client_ctx && trusted);
  EXPECT_EQ(X509_STORE_add_cert(SSL_CTX_get_cert_store(client_ctx.get()), trusted.get()), 1);
  SSL_CTX_set_verify(client_ctx.get(), SSL_VERIFY_PEER, nullptr);
  SslPtr ssl(SSL_new(client_ctx.get()));
  SSL_set_fd(ssl.get(), fds[1]);
  if (host_is_ip) {
    EXPECT_EQ(X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), host.c_str()), 1);
  } else {
    EXPECT_EQ(SSL_set_tlsext_host_name(ssl.get(), host.c_str()), 1);
    EXPECT_EQ(SSL_set1_host(ssl.get(), host.c_str()), 1);
  }
  if (SSL_connect(ssl.get()) == 1) {
    result.client_ok = true;
    char buf[4];
    if (SSL_write(ssl.get(), "ping", 4) == 4 && SSL_read(ssl.get(), buf, sizeof buf) == 4) {
      result.reply.assign(buf, 4);
    }
  }
  result.verify_result = SSL_get_verify_result(ssl.get());
  shutdown(fds[1], SHUT_RDWR);
  server.join();
  close(fds[0]);
  close(fds[1]);
  ERR_clear_error();
  return result;
}

TEST(ServingCertTlsTest, HandshakeSucceedsWithTheCertificateAsCaBundle) {
  const ServingCertRequest request = WebhookRequest();
  // The real clock: the handshake checks validity at the time it runs.
  absl::StatusOr<ServingCert> cert = GenerateServingCert(request, absl::Now());
  ASSERT_TRUE(cert.ok()) << cert.status();

  for (const std::string& name : request.dns_names) {
    HandshakeResult r = Handshake(*cert, cert->cert_pem, name, /*host_is_ip=*/false);
    EXPECT_TRUE(r.client_ok) << name;
    EXPECT_TRUE(r.server_ok) << name;
    EXPECT_EQ(r.verify_result, X509_V_OK)
        << name << ": " << X509_verify_cert_error_string(r.verify_result);
    EXPECT_EQ(r.reply, "pong") << name;
  }
  for (const std::string& ip : request.ip_addresses) {
    HandshakeResult r = Handshake(*cert, cert->cert_pem, ip, /*host_is_ip=*/true);
    EXPECT_TRUE(r.client_ok) << ip;
    EXPECT_EQ(r.verify_result, X509_V_OK)
        << ip << ": " << X509_verify_cert_error_string(r.verify_result);
    EXPECT_EQ(r.reply, "pong") << ip;
  }
}

TEST(ServingCertTlsTest, HandshakeFailsWithAnotherRootOrName) {
  const ServingCertRequest request = WebhookRequest();
  absl::StatusOr<ServingCert> cert = GenerateServingCert(request, absl::Now());
  absl::StatusOr<ServingCert> other = GenerateServingCert(request, absl::Now());
  ASSERT_TRUE(cert.ok()) << cert.status();
  ASSERT_TRUE(other.ok()) << other.status();

  // A caBundle from another generation (say, a Secret regenerated after the
  // webhook configuration was written) does not verify this certificate.
  HandshakeResult wrong_root =
      Handshake(*cert, other->cert_pem, request.dns_names[2], /*host_is_ip=*/false);
  EXPECT_FALSE(wrong_root.client_ok);
  EXPECT_FALSE(wrong_root.server_ok);
  EXPECT_EQ(wrong_root.verify_result, X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT)
      << X509_verify_cert_error_string(wrong_root.verify_result);

  HandshakeResult wrong_name =
      Handshake(*cert, cert->cert_pem, "evil.kubetrain-system.svc", /*host_is_ip=*/false);
  EXPECT_FALSE(wrong_name.client_ok);
  EXPECT_EQ(wrong_name.verify_result, X509_V_ERR_HOSTNAME_MISMATCH)
      << X509_verify_cert_error_string(wrong_name.verify_result);

  HandshakeResult wrong_ip = Handshake(*cert, cert->cert_pem, "127.0.0.2", /*host_is_ip=*/true);
  EXPECT_FALSE(wrong_ip.client_ok);
  EXPECT_EQ(wrong_ip.verify_result, X509_V_ERR_IP_ADDRESS_MISMATCH)
      << X509_verify_cert_error_string(wrong_ip.verify_result);
}

// --- CheckServingCert ---

TEST(CheckServingCertTest, FreshCertificateIsOk) {
  const ServingCertRequest request = WebhookRequest();
  absl::StatusOr<ServingCert> cert = GenerateServingCert(request, kNow);
  ASSERT_TRUE(cert.ok()) << cert.status();
  EXPECT_TRUE(CheckServingCert(*cert, request, kNow, absl::Hours(24 * 30)).ok());
  // Also later in its life, and within the hour of skew before `now`.
  EXPECT_TRUE(
      CheckServingCert(*cert, request, kNow + absl::Hours(24 * 365 * 5), absl::Hours(24 * 30))
          .ok());
  EXPECT_TRUE(
      CheckServingCert(*cert, request, kNow - absl::Minutes(30), absl::ZeroDuration()).ok());

  // Fewer names than it carries, DNS names in another case, an IPv6 address
  // written another way.
  ServingCertRequest fewer;
  fewer.dns_names = {"KUBETRAIN-WEBHOOK.kubetrain-system.svc"};
  fewer.ip_addresses = {"0:0:0:0:0:0:0:1"};
  EXPECT_TRUE(CheckServingCert(*cert, fewer, kNow, absl::Hours(1)).ok());
}

TEST(CheckServingCertTest, MissingNamesAreNamed) {
  absl::StatusOr<ServingCert> cert = GenerateServingCert(WebhookRequest(), kNow);
  ASSERT_TRUE(cert.ok()) << cert.status();

  ServingCertRequest more_dns = WebhookRequest();
  more_dns.dns_names.push_back("kubetrain-webhook.other-namespace.svc");
  absl::Status status = CheckServingCert(*cert, more_dns, kNow, absl::Hours(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("DNS:kubetrain-webhook.other-namespace.svc"))
      << status;

  ServingCertRequest more_ip = WebhookRequest();
  more_ip.ip_addresses.push_back("10.96.0.12");
  status = CheckServingCert(*cert, more_ip, kNow, absl::Hours(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("IP:10.96.0.12")) << status;
  EXPECT_THAT(std::string(status.message()), Not(HasSubstr("DNS:"))) << status;
}

TEST(CheckServingCertTest, ExpiringOrNotYetValidIsReported) {
  ServingCertRequest request = WebhookRequest();
  request.validity = absl::Hours(24);
  absl::StatusOr<ServingCert> cert = GenerateServingCert(request, kNow);
  ASSERT_TRUE(cert.ok()) << cert.status();

  EXPECT_TRUE(CheckServingCert(*cert, request, kNow, absl::Hours(23)).ok());
  absl::Status status = CheckServingCert(*cert, request, kNow, absl::Hours(25));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("expires at 2026-06-02T12:00:00Z"))
      << status;

  // Already expired.
  status = CheckServingCert(*cert, request, kNow + absl::Hours(24 * 400), absl::ZeroDuration());
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("expires at")) << status;

  // The clock went back more than the hour of skew.
  status = CheckServingCert(*cert, request, kNow - absl::Hours(2), absl::ZeroDuration());
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("not valid before 2026-06-01T11:00:00Z"))
      << status;
}

TEST(CheckServingCertTest, KeyOfAnotherCertificateDoesNotMatch) {
  const ServingCertRequest request = WebhookRequest();
  absl::StatusOr<ServingCert> a = GenerateServingCert(request, kNow);
  absl::StatusOr<ServingCert> b = GenerateServingCert(request, kNow);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ServingCert mixed{a->cert_pem, b->key_pem};
  absl::Status status = CheckServingCert(mixed, request, kNow, absl::Hours(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("key does not match")) << status;
}

TEST(CheckServingCertTest, EveryProblemIsListed) {
  ServingCertRequest request = WebhookRequest();
  request.validity = absl::Hours(1);
  absl::StatusOr<ServingCert> a = GenerateServingCert(request, kNow);
  absl::StatusOr<ServingCert> b = GenerateServingCert(request, kNow);
  ASSERT_TRUE(a.ok() && b.ok());
  request.dns_names.push_back("new.kubetrain-system.svc");
  absl::Status status =
      CheckServingCert(ServingCert{a->cert_pem, b->key_pem}, request, kNow, absl::Hours(24));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("key does not match")) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("expires at")) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("DNS:new.kubetrain-system.svc")) << status;
}

TEST(CheckServingCertTest, UnparsablePemIsInvalidArgument) {
  const ServingCertRequest request = WebhookRequest();
  absl::StatusOr<ServingCert> cert = GenerateServingCert(request, kNow);
  ASSERT_TRUE(cert.ok()) << cert.status();

  const std::vector<ServingCert> bad = {
      {"garbage", cert->key_pem},
      {cert->cert_pem, "garbage"},
      {"", ""},
      {cert->cert_pem.substr(0, cert->cert_pem.size() / 2), cert->key_pem},
      {cert->key_pem, cert->key_pem},    // a key where the certificate goes
      {cert->cert_pem, cert->cert_pem},  // and the other way round
  };
  for (const ServingCert& c : bad) {
    absl::Status status = CheckServingCert(c, request, kNow, absl::Hours(1));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  }

  ServingCertRequest bad_ip = request;
  bad_ip.ip_addresses.push_back("not-an-ip");
  EXPECT_EQ(CheckServingCert(*cert, bad_ip, kNow, absl::Hours(1)).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kubetrain::kube
