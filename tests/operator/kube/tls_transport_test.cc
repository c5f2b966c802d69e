// CpprestTransport over TLS, against an in-test HTTPS server with a PKI
// generated at start: server verification with the cluster CA, the system
// roots and an unrelated CA, insecure-skip-tls-verify, client certificates,
// hostname verification, a kubeconfig with *-data fields end to end, and
// bearer token rotation after a 401.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "operator/kube/api_error.h"
#include "operator/kube/cpprest_transport.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/kube_config.h"
#include "operator/kube/resource.h"
#include "tests/operator/kube/tls_test_server.h"
#include "tests/support/temp_files.h"
#include "tests/support/wait_for.h"

namespace kubetrain::kube {
namespace {

using ::kubetrain::testing_util::WaitFor;

using testing::CertSpec;
using ::testing::HasSubstr;
using testing::KeyAndCert;
using testing::TestCa;
using testing::TlsRequest;
using testing::TlsResponse;
using testing::TlsServerOptions;
using testing::TlsTestServer;

// Every certificate the cases use, generated once for the suite.
struct Pki {
  TestCa ca;
  TestCa other_ca;               // unrelated to everything else
  KeyAndCert server;             // IP 127.0.0.1, DNS localhost; signed by ca
  KeyAndCert server_wrong_name;  // DNS other.example only; signed by ca
  KeyAndCert client;             // clientAuth; signed by ca
};

absl::StatusOr<Pki> MakePki() {
  absl::StatusOr<TestCa> ca = TestCa::Create("kubetrain test CA");
  if (!ca.ok()) return ca.status();
  absl::StatusOr<TestCa> other = TestCa::Create("unrelated test CA");
  if (!other.ok()) return other.status();
  absl::StatusOr<KeyAndCert> server =
      ca->Issue(CertSpec{"kube-apiserver", {"localhost"}, {"127.0.0.1"}, /*server=*/true});
  if (!server.ok()) return server.status();
  absl::StatusOr<KeyAndCert> wrong_name =
      ca->Issue(CertSpec{"other.example", {"other.example"}, {}, /*server=*/true});
  if (!wrong_name.ok()) return wrong_name.status();
  absl::StatusOr<KeyAndCert> client =
      ca->Issue(CertSpec{"kubetrain-operator", {}, {}, /*server=*/false});
  if (!client.ok()) return client.status();
  return Pki{*std::move(ca), *std::move(other), *std::move(server), *std::move(wrong_name),
             *std::move(client)};
}

class TlsTransportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<Pki> pki = MakePki();
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = new Pki(*std::move(pki));
  }
  void SetUp() override { ASSERT_NE(pki_, nullptr) << "no test PKI"; }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }

  void StartServer(TlsServerOptions options) {
    absl::StatusOr<std::unique_ptr<TlsTestServer>> server =
        TlsTestServer::Start(std::move(options));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  void StartServer(const KeyAndCert& cert) {
    TlsServerOptions options;
    options.server = cert;
    StartServer(std::move(options));
  }

  KubeConfig Config() const {
    KubeConfig config;
    config.server = server_->url();
    config.source = "tls test";
    return config;
  }

  // A client over a fresh CpprestTransport for `config`; one attempt per
  // call so a TLS failure is seen once, not retried.
  absl::StatusOr<std::unique_ptr<KubeClient>> Client(const KubeConfig& config) {
    TransportOptions options;
    options.request_timeout = absl::Seconds(10);
    absl::StatusOr<std::unique_ptr<CpprestTransport>> transport =
        CpprestTransport::Create(config, options, env_, clock_);
    if (!transport.ok()) return transport.status();
    RetryPolicy retry;
    retry.max_attempts = 1;
    return std::make_unique<KubeClient>(*std::move(transport), retry);
  }

  absl::StatusOr<Json> GetPod(const KubeConfig& config) {
    absl::StatusOr<std::unique_ptr<KubeClient>> client = Client(config);
    if (!client.ok()) return client.status();
    return (*client)->Get(kPods, "default", "x");
  }

  // A failed GET: a network error (no HTTP answer) whose message names the
  // request and the server.
  void ExpectNetworkError(const absl::StatusOr<Json>& got) {
    ASSERT_FALSE(got.ok()) << got->dump();
    EXPECT_TRUE(IsNetwork(got.status())) << got.status();
    EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
    EXPECT_THAT(
        std::string(got.status().message()),
        HasSubstr(absl::StrCat("GET /api/v1/namespaces/default/pods/x: network error: ",
                               "GET /api/v1/namespaces/default/pods/x to ", server_->url())))
        << got.status();
  }

  static Pki* pki_;
  RealConfigEnvironment env_;
  FakeClock clock_;  // token files are re-read only after a 401
  std::unique_ptr<TlsTestServer> server_;
};

Pki* TlsTransportTest::pki_ = nullptr;

TEST_F(TlsTransportTest, ClusterCaVerifiesServerAndBearerTokenArrives) {
  ASSERT_NO_FATAL_FAILURE(StartServer(pki_->server));
  KubeConfig config = Config();
  config.ca_pem = pki_->ca.cert_pem();
  config.token = "s3cret-token";
  absl::StatusOr<Json> pod = GetPod(config);
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ((*pod)["metadata"]["name"], "x");
  EXPECT_EQ((*pod)["kind"], "Pod");
  std::vector<TlsRequest> requests = server_->Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "GET");
  EXPECT_EQ(requests[0].target, "/api/v1/namespaces/default/pods/x");
  EXPECT_EQ(requests[0].authorization, "Bearer s3cret-token");
  EXPECT_FALSE(requests[0].client_cert_presented);
  EXPECT_EQ(server_->HandshakeFailures(), 0);
}

TEST_F(TlsTransportTest, SystemRootsRejectTheTestCa) {
  ASSERT_NO_FATAL_FAILURE(StartServer(pki_->server));
  KubeConfig config = Config();  // no CA: the system roots
  config.token = "s3cret-token";
  absl::StatusOr<Json> pod = GetPod(config);
  ExpectNetworkError(pod);
  EXPECT_THAT(std::string(pod.status().message()), HasSubstr("Error in SSL handshake"))
      << pod.status();
  EXPECT_THAT(std::string(pod.status().message()), HasSubstr("certificate-authority(-data)"))
      << "the message tells the user where to look";
  // The token never left the client, which refused the chain.
  EXPECT_TRUE(server_->Requests().empty());
  ASSERT_TRUE(WaitFor([&] { return server_->HandshakeFailures() >= 1; }));
  EXPECT_THAT(server_->LastHandshakeError(), HasSubstr("alert unknown ca"));
}

TEST_F(TlsTransportTest, UnrelatedCaIsRejected) {
  ASSERT_NO_FATAL_FAILURE(StartServer(pki_->server));
  KubeConfig config = Config();
  config.ca_pem = pki_->other_ca.cert_pem();
  config.token = "s3cret-token";
  absl::StatusOr<Json> pod = GetPod(config);
  ExpectNetworkError(pod);
  EXPECT_THAT(std::string(pod.status().message()), HasSubstr("Error in SSL handshake"))
      << pod.status();
  EXPECT_TRUE(server_->Requests().empty());
  ASSERT_TRUE(WaitFor([&] { return server_->HandshakeFailures() >= 1; }));
  EXPECT_THAT(server_->LastHandshakeError(), HasSubstr("alert unknown ca"));
}

TEST_F(TlsTransportTest, InsecureSkipTlsVerifyAcceptsAnyServer) {
  // Unknown to the system roots, and the wrong name.
  ASSERT_NO_FATAL_FAILURE(StartServer(pki_->server_wrong_name));
  KubeConfig config = Config();
  config.insecure_skip_tls_verify = true;
  config.token = "t";
  absl::StatusOr<Json> pod = GetPod(config);
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ((*pod)["metadata"]["name"], "x");
  ASSERT_EQ(server_->Requests().size(), 1u);
  EXPECT_EQ(server_->Requests()[0].authorization, "Bearer t");
}

TEST_F(TlsTransportTest, ClientCertificateIsPresentedAndVerified) {
  TlsServerOptions options;
  options.server = pki_->server;
  options.client_ca_pem = pki_->ca.cert_pem();
  options.require_client_cert = true;
  ASSERT_NO_FATAL_FAILURE(StartServer(std::move(options)));
  KubeConfig config = Config();
  config.ca_pem = pki_->ca.cert_pem();
  config.client_cert_pem = pki_->client.cert_pem;
  config.client_key_pem = pki_->client.key_pem;
  absl::StatusOr<Json> pod = GetPod(config);
  ASSERT_TRUE(pod.ok()) << pod.status();
  std::vector<TlsRequest> requests = server_->Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_TRUE(requests[0].client_cert_presented);
  EXPECT_TRUE(requests[0].client_cert_verified);
  EXPECT_THAT(requests[0].client_cert_subject, HasSubstr("CN=kubetrain-operator"));
  EXPECT_EQ(requests[0].authorization, "");  // no token configured
}

TEST_F(TlsTransportTest, ClientKeyOfAnotherCertificateIsRefusedUpFront) {
  ASSERT_NO_FATAL_FAILURE(StartServer(pki_->server));
  KubeConfig config = Config();
  config.ca_pem = pki_->ca.cert_pem();
  config.client_cert_pem = pki_->client.cert_pem;
  config.client_key_pem = pki_->server.key_pem;  // a valid key, but not this certificate's
  absl::StatusOr<std::unique_ptr<CpprestTransport>> transport =
      CpprestTransport::Create(config, {}, env_, clock_);
  ASSERT_FALSE(transport.ok());
  EXPECT_THAT(std::string(transport.status().message()),
              HasSubstr("the client key does not belong to the client certificate"));
}

TEST_F(TlsTransportTest, ServerRequiringAClientCertificateRejectsNone) {
  TlsServerOptions options;
  options.server = pki_->server;
  options.client_ca_pem = pki_->ca.cert_pem();
  options.require_client_cert = true;
  ASSERT_NO_FATAL_FAILURE(StartServer(std::move(options)));
  KubeConfig config = Config();
  config.ca_pem = pki_->ca.cert_pem();
  absl::StatusOr<Json> pod = GetPod(config);
  // Under TLS 1.3 the client finishes its side of the handshake before the
  // server checks for a certificate, so cpprest's text varies with the TLS
  // version ("Failed to read HTTP status line" here): the server says why.
  ExpectNetworkError(pod);
  EXPECT_TRUE(server_->Requests().empty());
  ASSERT_TRUE(WaitFor([&] { return server_->HandshakeFailures() >= 1; }));
  EXPECT_THAT(server_->LastHandshakeError(), HasSubstr("peer did not return a certificate"));
}

TEST_F(TlsTransportTest, ServerCertificateForAnotherNameIsRejected) {
  ASSERT_NO_FATAL_FAILURE(StartServer(pki_->server_wrong_name));
  KubeConfig config = Config();
  config.ca_pem = pki_->ca.cert_pem();  // the right CA: only the name is wrong
  config.token = "s3cret-token";
  absl::StatusOr<Json> pod = GetPod(config);
  ExpectNetworkError(pod);
  EXPECT_THAT(std::string(pod.status().message()), HasSubstr("Error in SSL handshake"))
      << pod.status();
  EXPECT_TRUE(server_->Requests().empty()) << "the token went to a server of another name";
  // The chain was fine (no "unknown ca" alert): the client refused the name.
  // cpprest checks it with boost::asio::ssl::rfc2818_verification, whose
  // refusal OpenSSL reports to the server as an internal-error alert.
  ASSERT_TRUE(WaitFor([&] { return server_->HandshakeFailures() >= 1; }));
  EXPECT_THAT(server_->LastHandshakeError(), HasSubstr("alert internal error"));
}

TEST_F(TlsTransportTest, KubeconfigWithInlineDataEndToEnd) {
  TlsServerOptions options;
  options.server = pki_->server;
  options.client_ca_pem = pki_->ca.cert_pem();
  options.require_client_cert = true;
  ASSERT_NO_FATAL_FAILURE(StartServer(std::move(options)));
  data::testing_util::TempDir dir;
  const std::string path = dir.File("kubeconfig");
  data::testing_util::WritePlain(path, absl::StrCat("apiVersion: v1\n"
                                                    "kind: Config\n"
                                                    "current-context: tls\n"
                                                    "clusters:\n"
                                                    "- name: tls-cluster\n"
                                                    "  cluster:\n"
                                                    "    server: ",
                                                    server_->url(),
                                                    "/\n"
                                                    "    certificate-authority-data: ",
                                                    absl::Base64Escape(pki_->ca.cert_pem()),
                                                    "\n"
                                                    "users:\n"
                                                    "- name: operator\n"
                                                    "  user:\n"
                                                    "    client-certificate-data: ",
                                                    absl::Base64Escape(pki_->client.cert_pem),
                                                    "\n"
                                                    "    client-key-data: ",
                                                    absl::Base64Escape(pki_->client.key_pem),
                                                    "\n"
                                                    "contexts:\n"
                                                    "- name: tls\n"
                                                    "  context:\n"
                                                    "    cluster: tls-cluster\n"
                                                    "    user: operator\n"
                                                    "    namespace: default\n"));
  absl::StatusOr<KubeConfig> config = LoadKubeConfigFile(path, "", env_);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server, server_->url());
  absl::StatusOr<Json> pod = GetPod(*config);
  ASSERT_TRUE(pod.ok()) << pod.status();
  std::vector<TlsRequest> requests = server_->Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_TRUE(requests[0].client_cert_verified);
}

TEST_F(TlsTransportTest, RotatedTokenFileIsReReadAfter401) {
  data::testing_util::TempDir dir;
  const std::string token_file = dir.File("token");
  data::testing_util::WritePlain(token_file, "old-token\n");
  std::string accepted = "Bearer old-token";
  absl::Mutex mu;
  TlsServerOptions options;
  options.server = pki_->server;
  options.handler = [&](const TlsRequest& request) {
    absl::MutexLock lock(&mu);
    if (request.authorization == accepted) return TlsResponse{200, TlsTestServer::PodJson("x")};
    return TlsResponse{401,
                       R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
                       R"("message":"Unauthorized","reason":"Unauthorized","code":401})"};
  };
  ASSERT_NO_FATAL_FAILURE(StartServer(std::move(options)));
  KubeConfig config = Config();
  config.ca_pem = pki_->ca.cert_pem();
  config.token_file = token_file;
  absl::StatusOr<std::unique_ptr<KubeClient>> client = Client(config);
  ASSERT_TRUE(client.ok()) << client.status();

  ASSERT_TRUE((*client)->Get(kPods, "default", "x").ok());
  // The kubelet rotates the token and the old one stops working. The clock
  // does not move: the client keeps its cached token until the 401...
  data::testing_util::WritePlain(token_file, "new-token\n");
  {
    absl::MutexLock lock(&mu);
    accepted = "Bearer new-token";
  }
  absl::StatusOr<Json> rejected = (*client)->Get(kPods, "default", "x");
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(KindOf(rejected.status()), ApiErrorKind::kUnauthorized) << rejected.status();
  // ...and re-reads the file for its next request.
  absl::StatusOr<Json> pod = (*client)->Get(kPods, "default", "x");
  ASSERT_TRUE(pod.ok()) << pod.status();
  std::vector<TlsRequest> requests = server_->Requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].authorization, "Bearer old-token");
  EXPECT_EQ(requests[1].authorization, "Bearer old-token");
  EXPECT_EQ(requests[2].authorization, "Bearer new-token");
  server_->Stop();  // before `mu` and `accepted`, which the handler uses, go
}

TEST(TlsTestServer, StopsWithAnIdleConnectionOpen) {
  absl::StatusOr<TestCa> ca = TestCa::Create("stop CA");
  ASSERT_TRUE(ca.ok()) << ca.status();
  absl::StatusOr<KeyAndCert> cert = ca->Issue(CertSpec{"s", {}, {"127.0.0.1"}, true});
  ASSERT_TRUE(cert.ok()) << cert.status();
  TlsServerOptions options;
  options.server = *cert;
  absl::StatusOr<std::unique_ptr<TlsTestServer>> server = TlsTestServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  KubeConfig config;
  config.server = (*server)->url();
  config.ca_pem = ca->cert_pem();
  RealConfigEnvironment env;
  RealClock clock;
  absl::StatusOr<std::unique_ptr<CpprestTransport>> transport =
      CpprestTransport::Create(config, TransportOptions{}, env, clock);
  ASSERT_TRUE(transport.ok()) << transport.status();
  KubeClient client(*std::move(transport));
  ASSERT_TRUE(client.Get(kPods, "default", "x").ok());
  // The client keeps its connection open; Stop() must not wait for it.
  absl::Time start = absl::Now();
  (*server)->Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

}  // namespace
}  // namespace kubetrain::kube
