// Test helpers for TLS: a throwaway PKI generated in memory with the OpenSSL 3
// API (no `openssl` command needed) and a small HTTPS/1.1 server on
// 127.0.0.1 that answers every request through a handler and records what it
// saw (the Authorization header, whether a client certificate was presented
// and verified, failed handshakes).
//
// TestCa is a value type (not thread-safe to mutate). TlsTestServer is
// thread-safe: requests are served on their own threads; Requests(),
// HandshakeFailures() and SetHandler() may be called from any thread.
#ifndef KUBETRAIN_TESTS_OPERATOR_KUBE_TLS_TEST_SERVER_H_
#define KUBETRAIN_TESTS_OPERATOR_KUBE_TLS_TEST_SERVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace kubetrain::kube::testing {

// A private key and the certificate for it, both PEM.
struct KeyAndCert {
  std::string key_pem;
  std::string cert_pem;
};

// What a certificate is for and the names it carries.
struct CertSpec {
  std::string common_name;
  std::vector<std::string> dns_names;  // subjectAltName DNS entries
  std::vector<std::string> ip_names;   // subjectAltName IP entries ("127.0.0.1")
  bool server = true;                  // extendedKeyUsage serverAuth, else clientAuth
};

// A self-signed certificate authority (ECDSA P-256, valid for a day) that
// issues leaf certificates.
class TestCa {
 public:
  static absl::StatusOr<TestCa> Create(const std::string& common_name);

  absl::StatusOr<KeyAndCert> Issue(const CertSpec& spec) const;
  const std::string& cert_pem() const { return self_.cert_pem; }

 private:
  explicit TestCa(KeyAndCert self) : self_(std::move(self)) {}
  KeyAndCert self_;
};

struct TlsRequest {
  std::string method;
  std::string target;
  std::string authorization;  // "" when the header was absent
  bool client_cert_presented = false;
  bool client_cert_verified = false;  // presented and chained to client_ca_pem
  std::string client_cert_subject;    // one-line subject, "" when none
};

struct TlsResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};

using TlsHandler = std::function<TlsResponse(const TlsRequest&)>;

struct TlsServerOptions {
  KeyAndCert server;  // the server's key and certificate
  // Non-empty: ask for a client certificate and verify it against this CA.
  std::string client_ca_pem;
  // With client_ca_pem: fail the handshake when the client sends none.
  bool require_client_cert = false;
  TlsHandler handler;  // empty: 200 with a Pod named "x"
};

class TlsTestServer {
 public:
  // Listens on 127.0.0.1 on a free port.
  static absl::StatusOr<std::unique_ptr<TlsTestServer>> Start(TlsServerOptions options);
  ~TlsTestServer();  // Stop()
  TlsTestServer(const TlsTestServer&) = delete;
  TlsTestServer& operator=(const TlsTestServer&) = delete;

  int port() const { return port_; }
  std::string url() const;  // "https://127.0.0.1:<port>"

  void SetHandler(TlsHandler handler);
  std::vector<TlsRequest> Requests() const;
  int HandshakeFailures() const;
  std::string LastHandshakeError() const;  // OpenSSL's reason, "" when none

  // Closes the listener and every connection, joins every thread. Idempotent.
  void Stop();

  // A Pod as the API server would return it.
  static std::string PodJson(const std::string& name);

 private:
  struct Connection {
    int fd = -1;
    std::thread thread;
  };

  TlsTestServer() = default;
  void AcceptLoop();
  void Serve(Connection* connection);
  void Record(TlsRequest request);
  void HandshakeFailed(std::string reason);
  TlsResponse Handle(const TlsRequest& request);

  void* ssl_ctx_ = nullptr;  // SSL_CTX*, kept out of this header
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  int port_ = 0;
  std::thread acceptor_;
  std::atomic<bool> stopping_{false};

  mutable absl::Mutex mu_;
  TlsHandler handler_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);
  std::vector<TlsRequest> requests_ ABSL_GUARDED_BY(mu_);
  int handshake_failures_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_handshake_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kubetrain::kube::testing

#endif  // KUBETRAIN_TESTS_OPERATOR_KUBE_TLS_TEST_SERVER_H_
