#include "tests/operator/kube/tls_test_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace kubetrain::kube::testing {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct SslFree {
  void operator()(SSL* s) const { SSL_free(s); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using SslPtr = std::unique_ptr<SSL, SslFree>;

// The first error on this thread's OpenSSL error queue, emptying it.
std::string OpenSslError(const std::string& what) {
  unsigned long code = ERR_get_error();  // NOLINT(runtime/int): OpenSSL's type
  ERR_clear_error();
  if (code == 0) return what;
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return absl::StrCat(what, ": ", text);
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);  // NOLINT(runtime/int): OpenSSL's type
  return std::string(data, static_cast<size_t>(n));
}

absl::StatusOr<std::string> KeyPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return absl::InternalError(OpenSslError("writing a private key"));
  return BioText(bio.get());
}

absl::StatusOr<std::string> CertPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1)
    return absl::InternalError(OpenSslError("writing a certificate"));
  return BioText(bio.get());
}

absl::StatusOr<PkeyPtr> ReadKey(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) return absl::InvalidArgumentError(OpenSslError("reading a private key"));
  return key;
}

absl::StatusOr<X509Ptr> ReadCert(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) return absl::InvalidArgumentError(OpenSslError("reading a certificate"));
  return cert;
}

absl::Status AddExtension(X509* cert, X509V3_CTX* ctx, int nid, const std::string& value) {
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str());
  if (ext == nullptr) {
    return absl::InternalError(OpenSslError(absl::StrCat("extension ", OBJ_nid2sn(nid))));
  }
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1) return absl::InternalError(OpenSslError("adding an extension"));
  return absl::OkStatus();
}

// A certificate for `key` named by `spec`, signed by `issuer_key` (and
// issued by `issuer`, or self-signed when it is null). `ca`: a CA
// certificate rather than a leaf.
absl::StatusOr<X509Ptr> MakeCert(EVP_PKEY* key, const CertSpec& spec, bool ca, X509* issuer,
                                 EVP_PKEY* issuer_key) {
  X509Ptr cert(X509_new());
  if (!cert) return absl::InternalError(OpenSslError("X509_new"));
  X509_set_version(cert.get(), X509_VERSION_3);
  unsigned char serial_bytes[8];
  if (RAND_bytes(serial_bytes, sizeof serial_bytes) != 1)
    return absl::InternalError(OpenSslError("RAND_bytes"));
  uint64_t serial = 0;
  for (unsigned char b : serial_bytes) serial = (serial << 8) | b;
  ASN1_INTEGER_set_uint64(X509_get_serialNumber(cert.get()), serial >> 1);  // positive
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(spec.common_name.c_str()), -1,
                             -1, 0);
  X509_set_issuer_name(cert.get(), issuer != nullptr ? X509_get_subject_name(issuer) : name);

  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer != nullptr ? issuer : cert.get(), cert.get(), nullptr, nullptr, 0);
  std::vector<std::pair<int, std::string>> extensions;
  if (ca) {
    extensions = {{NID_basic_constraints, "critical,CA:TRUE"},
                  {NID_key_usage, "critical,keyCertSign,cRLSign"}};
  } else {
    extensions = {{NID_basic_constraints, "critical,CA:FALSE"},
                  {NID_key_usage, "critical,digitalSignature,keyEncipherment"},
                  {NID_ext_key_usage, spec.server ? "serverAuth" : "clientAuth"}};
    std::vector<std::string> alt;
    for (const std::string& dns : spec.dns_names) alt.push_back(absl::StrCat("DNS:", dns));
    for (const std::string& ip : spec.ip_names) alt.push_back(absl::StrCat("IP:", ip));
    if (!alt.empty()) extensions.emplace_back(NID_subject_alt_name, absl::StrJoin(alt, ","));
  }
  // The subject key id first: a self-signed certificate's authority key id
  // refers to it.
  extensions.emplace_back(NID_subject_key_identifier, "hash");
  extensions.emplace_back(NID_authority_key_identifier, "keyid:always");
  for (const auto& [nid, value] : extensions) {
    absl::Status added = AddExtension(cert.get(), &ctx, nid, value);
    if (!added.ok()) return added;
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) <= 0)
    return absl::InternalError(OpenSslError("X509_sign"));
  return cert;
}

absl::StatusOr<PkeyPtr> NewKey() {
  PkeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return absl::InternalError(OpenSslError("generating an EC key"));
  return key;
}

std::string ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    default:
      return "Status";
  }
}

bool WriteAll(SSL* ssl, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    int n = SSL_write(ssl, data.data() + done, static_cast<int>(data.size() - done));
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Appends what SSL_read returns to *buf; false at EOF or on an error.
bool ReadMore(SSL* ssl, std::string* buf) {
  char chunk[8192];
  int n = SSL_read(ssl, chunk, sizeof chunk);
  if (n <= 0) return false;
  buf->append(chunk, static_cast<size_t>(n));
  return true;
}

}  // namespace

absl::StatusOr<TestCa> TestCa::Create(const std::string& common_name) {
  absl::StatusOr<PkeyPtr> key = NewKey();
  if (!key.ok()) return key.status();
  CertSpec spec;
  spec.common_name = common_name;
  absl::StatusOr<X509Ptr> cert = MakeCert(key->get(), spec, /*ca=*/true, nullptr, key->get());
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key_pem = KeyPem(key->get());
  if (!key_pem.ok()) return key_pem.status();
  absl::StatusOr<std::string> cert_pem = CertPem(cert->get());
  if (!cert_pem.ok()) return cert_pem.status();
  return TestCa(KeyAndCert{*std::move(key_pem), *std::move(cert_pem)});
}

absl::StatusOr<KeyAndCert> TestCa::Issue(const CertSpec& spec) const {
  absl::StatusOr<PkeyPtr> ca_key = ReadKey(self_.key_pem);
  if (!ca_key.ok()) return ca_key.status();
  absl::StatusOr<X509Ptr> ca_cert = ReadCert(self_.cert_pem);
  if (!ca_cert.ok()) return ca_cert.status();
  absl::StatusOr<PkeyPtr> key = NewKey();
  if (!key.ok()) return key.status();
  absl::StatusOr<X509Ptr> cert =
      MakeCert(key->get(), spec, /*ca=*/false, ca_cert->get(), ca_key->get());
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key_pem = KeyPem(key->get());
  if (!key_pem.ok()) return key_pem.status();
  absl::StatusOr<std::string> cert_pem = CertPem(cert->get());
  if (!cert_pem.ok()) return cert_pem.status();
  return KeyAndCert{*std::move(key_pem), *std::move(cert_pem)};
}

absl::StatusOr<std::unique_ptr<TlsTestServer>> TlsTestServer::Start(TlsServerOptions options) {
  // A client that hangs up mid-answer must not kill the test with SIGPIPE
  // (SSL_write writes to the socket with write(2)).
  signal(SIGPIPE, SIG_IGN);

  std::unique_ptr<TlsTestServer> server(new TlsTestServer());
  server->handler_ = std::move(options.handler);

  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return absl::InternalError(OpenSslError("SSL_CTX_new"));
  server->ssl_ctx_ = ctx;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  absl::StatusOr<X509Ptr> cert = ReadCert(options.server.cert_pem);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<PkeyPtr> key = ReadKey(options.server.key_pem);
  if (!key.ok()) return key.status();
  if (SSL_CTX_use_certificate(ctx, cert->get()) != 1 ||
      SSL_CTX_use_PrivateKey(ctx, key->get()) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    return absl::InvalidArgumentError(OpenSslError("server key and certificate"));
  }
  if (!options.client_ca_pem.empty()) {
    absl::StatusOr<X509Ptr> client_ca = ReadCert(options.client_ca_pem);
    if (!client_ca.ok()) return client_ca.status();
    if (X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), client_ca->get()) != 1 ||
        SSL_CTX_add_client_CA(ctx, client_ca->get()) != 1) {
      return absl::InternalError(OpenSslError("client CA"));
    }
    SSL_CTX_set_verify(
        ctx, SSL_VERIFY_PEER | (options.require_client_cert ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
        nullptr);
  }

  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  server->listen_fd_ = fd;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 16) != 0) {
    return absl::InternalError(absl::StrCat("bind/listen: ", strerror(errno)));
  }
  socklen_t len = sizeof addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return absl::InternalError(absl::StrCat("getsockname: ", strerror(errno)));
  }
  server->port_ = ntohs(addr.sin_port);
  if (pipe2(server->wake_pipe_, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
  }
  server->acceptor_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

TlsTestServer::~TlsTestServer() { Stop(); }

std::string TlsTestServer::url() const { return absl::StrCat("https://127.0.0.1:", port_); }

void TlsTestServer::SetHandler(TlsHandler handler) {
  absl::MutexLock lock(&mu_);
  handler_ = std::move(handler);
}

std::vector<TlsRequest> TlsTestServer::Requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

int TlsTestServer::HandshakeFailures() const {
  absl::MutexLock lock(&mu_);
  return handshake_failures_;
}

std::string TlsTestServer::LastHandshakeError() const {
  absl::MutexLock lock(&mu_);
  return last_handshake_error_;
}

std::string TlsTestServer::PodJson(const std::string& name) {
  return absl::StrCat(
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")", name,
      R"(","namespace":"default","uid":"0b4a7c1e-tls","resourceVersion":"7"},)",
      R"("spec":{"containers":[{"name":"c","image":"busybox"}]},"status":{"phase":"Running"}})");
}

void TlsTestServer::Stop() {
  if (stopping_.exchange(true)) return;
  if (wake_pipe_[1] >= 0) {
    char c = 'x';
    while (write(wake_pipe_[1], &c, 1) < 0 && errno == EINTR) {
    }
  }
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::unique_ptr<Connection>> connections;
  {
    absl::MutexLock lock(&mu_);
    connections.swap(connections_);
  }
  // Wakes threads blocked in SSL_accept/SSL_read; the descriptors are closed
  // only after their thread ends so their numbers cannot be reused meanwhile.
  for (auto& c : connections) shutdown(c->fd, SHUT_RDWR);
  for (auto& c : connections) {
    if (c->thread.joinable()) c->thread.join();
    close(c->fd);
  }
  for (int* fd : {&listen_fd_, &wake_pipe_[0], &wake_pipe_[1]}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
  if (ssl_ctx_ != nullptr) SSL_CTX_free(static_cast<SSL_CTX*>(ssl_ctx_));
  ssl_ctx_ = nullptr;
}

void TlsTestServer::AcceptLoop() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    int ready = poll(fds, 2, -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0 || stopping_.load()) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    absl::MutexLock lock(&mu_);
    auto connection = std::make_unique<Connection>();
    connection->fd = fd;
    Connection* c = connection.get();
    connections_.push_back(std::move(connection));
    c->thread = std::thread([this, c] { Serve(c); });
  }
}

void TlsTestServer::Record(TlsRequest request) {
  absl::MutexLock lock(&mu_);
  requests_.push_back(std::move(request));
}

void TlsTestServer::HandshakeFailed(std::string reason) {
  absl::MutexLock lock(&mu_);
  ++handshake_failures_;
  last_handshake_error_ = std::move(reason);
}

TlsResponse TlsTestServer::Handle(const TlsRequest& request) {
  TlsHandler handler;
  {
    absl::MutexLock lock(&mu_);
    handler = handler_;
  }
  if (handler) return handler(request);
  return TlsResponse{200, PodJson("x")};
}

void TlsTestServer::Serve(Connection* connection) {
  SslPtr ssl(SSL_new(static_cast<SSL_CTX*>(ssl_ctx_)));
  if (!ssl || SSL_set_fd(ssl.get(), connection->fd) != 1) {
    HandshakeFailed(OpenSslError("SSL_new"));
    shutdown(connection->fd, SHUT_RDWR);
    return;
  }
  ERR_clear_error();
  if (SSL_accept(ssl.get()) != 1) {
    HandshakeFailed(OpenSslError("handshake failed"));
    shutdown(connection->fd, SHUT_RDWR);
    return;
  }
  TlsRequest peer;
  X509Ptr client_cert(SSL_get1_peer_certificate(ssl.get()));
  if (client_cert) {
    peer.client_cert_presented = true;
    peer.client_cert_verified = SSL_get_verify_result(ssl.get()) == X509_V_OK;
    char subject[256];
    X509_NAME_oneline(X509_get_subject_name(client_cert.get()), subject, sizeof subject);
    peer.client_cert_subject = subject;
  }

  // HTTP/1.1 with keep-alive: requests one after another on this connection
  // until the client hangs up. Request bodies need a Content-Length (cpprest
  // sends one for string bodies); chunked requests are not supported.
  std::string buf;
  while (!stopping_.load()) {
    size_t header_end;
    while ((header_end = buf.find("\r\n\r\n")) == std::string::npos) {
      if (!ReadMore(ssl.get(), &buf)) {
        shutdown(connection->fd, SHUT_RDWR);
        return;
      }
    }
    TlsRequest request = peer;
    size_t content_length = 0;
    std::vector<std::string> lines =
        absl::StrSplit(buf.substr(0, header_end), "\r\n", absl::SkipEmpty());
    if (!lines.empty()) {
      std::vector<std::string> start = absl::StrSplit(lines[0], ' ');
      if (start.size() >= 2) {
        request.method = start[0];
        request.target = start[1];
      }
    }
    for (size_t i = 1; i < lines.size(); ++i) {
      size_t colon = lines[i].find(':');
      if (colon == std::string::npos) continue;
      std::string name = absl::AsciiStrToLower(lines[i].substr(0, colon));
      std::string value(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
      if (name == "authorization") request.authorization = value;
      if (name == "content-length" && !absl::SimpleAtoi(value, &content_length)) content_length = 0;
    }
    while (buf.size() < header_end + 4 + content_length) {
      if (!ReadMore(ssl.get(), &buf)) {
        shutdown(connection->fd, SHUT_RDWR);
        return;
      }
    }
    buf.erase(0, header_end + 4 + content_length);
    Record(request);
    TlsResponse response = Handle(request);
    std::string out =
        absl::StrCat("HTTP/1.1 ", response.status, " ", ReasonPhrase(response.status),
                     "\r\nContent-Type: ", response.content_type,
                     "\r\nContent-Length: ", response.body.size(), "\r\n\r\n", response.body);
    if (!WriteAll(ssl.get(), out)) break;
  }
  SSL_shutdown(ssl.get());
  shutdown(connection->fd, SHUT_RDWR);
}

}  // namespace kubetrain::kube::testing
