#include "operator/kube/https_server.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>

#include "tests/support/self_signed_cert.h"
#include "tests/support/temp_files.h"
#include "tests/support/wait_for.h"

namespace kubetrain::kube {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A TLS client that does not verify the server, as kube-apiserver without
// --kubelet-certificate-authority.
class Client {
 public:
  explicit Client(int port) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    ok_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    ok_ = ok_ && SSL_connect(ssl_) == 1;
  }
  ~Client() {
    SSL_free(ssl_);
    close(fd_);
    SSL_CTX_free(ctx_);
  }
  bool ok() const { return ok_; }
  void Send(const std::string& target) {
    SendRaw("GET " + target + " HTTP/1.1\r\nHost: node\r\n\r\n");
  }
  void SendRaw(const std::string& req) {
    ASSERT_EQ(SSL_write(ssl_, req.data(), static_cast<int>(req.size())),
              static_cast<int>(req.size()));
  }
  // Reads what is there; false at the end of the stream.
  bool ReadSome() {
    char buf[4096];
    const int n = SSL_read(ssl_, buf, sizeof(buf));
    if (n <= 0) return false;
    got_.append(buf, static_cast<size_t>(n));
    return true;
  }
  std::string ReadAll() {
    while (ReadSome()) {
    }
    return got_;
  }
  const std::string& got() const { return got_; }

 private:
  SSL_CTX* ctx_;
  SSL* ssl_;
  int fd_;
  bool ok_ = false;
  std::string got_;
};

class HttpsServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpsServer::Handler handler, size_t max_body_bytes = 8 << 20) {
    testing_util::WriteSelfSignedCert(dir_);
    HttpsServerOptions o;
    o.cert_file = dir_.File("cert.pem");
    o.key_file = dir_.File("key.pem");
    o.max_body_bytes = max_body_bytes;
    absl::StatusOr<std::unique_ptr<HttpsServer>> s = HttpsServer::Start(o, std::move(handler));
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  data::testing_util::TempDir dir_;
  std::unique_ptr<HttpsServer> server_;
};

TEST_F(HttpsServerTest, ServesAChunkedAnswerOverTlsWithTheDecodedRequest) {
  HttpsRequest seen;
  StartServer([&](const HttpsRequest& r, HttpsReply& reply) {
    seen = r;
    reply.Write("hello ");
    reply.Write("world\n");
  });
  Client client(server_->port());
  ASSERT_TRUE(client.ok());
  client.Send("/containerLogs/team/w%2D0/main?follow=true&tailLines=10");
  const std::string got = client.ReadAll();
  EXPECT_THAT(got, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(got, HasSubstr("Transfer-Encoding: chunked\r\n"));
  EXPECT_THAT(got, HasSubstr("\r\n\r\n6\r\nhello \r\n6\r\nworld\n\r\n0\r\n\r\n"));
  EXPECT_EQ(seen.method, "GET");
  EXPECT_EQ(seen.path, "/containerLogs/team/w-0/main");
  EXPECT_EQ(seen.query,
            (std::map<std::string, std::string>{{"follow", "true"}, {"tailLines", "10"}}));
}

TEST_F(HttpsServerTest, AnErrorHasItsCodeAndText) {
  StartServer(
      [](const HttpsRequest&, HttpsReply& reply) { reply.Fail(404, "pod \"x\" does not exist"); });
  Client client(server_->port());
  client.Send("/containerLogs/a/x/c");
  const std::string got = client.ReadAll();
  EXPECT_THAT(got, StartsWith("HTTP/1.1 404 Not Found\r\n"));
  EXPECT_THAT(got, HasSubstr("\r\n\r\npod \"x\" does not exist"));
}

TEST_F(HttpsServerTest, AHandlerSeesTheClientGoAwayAndStopEndsAFollow) {
  std::atomic<int> ended{0};
  StartServer([&](const HttpsRequest&, HttpsReply& reply) {
    reply.Write("streaming\n");
    while (!reply.Gone(absl::Milliseconds(50))) {
    }
    ++ended;
  });
  {
    Client client(server_->port());
    client.Send("/f");
    ASSERT_TRUE(client.ReadSome());
    EXPECT_THAT(client.got(), HasSubstr("streaming\n"));
  }  // the client hangs up
  EXPECT_TRUE(testing_util::WaitFor([&] { return ended.load() == 1; }));
  Client still(server_->port());
  still.Send("/f");
  ASSERT_TRUE(still.ReadSome());
  server_->Stop();  // returns only once the handler has
  EXPECT_EQ(ended.load(), 2);
}

TEST_F(HttpsServerTest, AWholeAnswerToAPostWithItsBodyAndHeaders) {
  HttpsRequest seen;
  StartServer([&](const HttpsRequest& r, HttpsReply& reply) {
    seen = r;
    reply.Respond(200, "application/json", R"({"ok":true})");
  });
  Client client(server_->port());
  // The body in two writes, the second after the head, as a client may.
  const std::string body(20000, 'x');
  client.SendRaw(
      "POST /validate?timeout=10s HTTP/1.1\r\nHost: op\r\nContent-Type: "
      "application/json\r\nContent-Length: " +
      std::to_string(body.size() + 4) + "\r\n\r\n{\"" + body.substr(0, 100));
  client.SendRaw(body.substr(100) + "\"}");
  const std::string got = client.ReadAll();
  EXPECT_THAT(got, StartsWith("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"));
  EXPECT_THAT(got, HasSubstr("Content-Length: 11\r\n"));
  EXPECT_THAT(got, HasSubstr("\r\n\r\n{\"ok\":true}"));
  EXPECT_EQ(seen.method, "POST");
  EXPECT_EQ(seen.path, "/validate");
  EXPECT_EQ(seen.headers["content-type"], "application/json");
  EXPECT_TRUE(seen.body == "{\"" + body + "\"}") << seen.body.size() << " bytes";
}

TEST_F(HttpsServerTest, ChunkedOrOversizedBodiesAreRefusedWithoutTheHandler) {
  std::atomic<int> handled{0};
  StartServer(
      [&](const HttpsRequest&, HttpsReply& reply) {
        ++handled;
        reply.Respond(200, "text/plain", "");
      },
      /*max_body_bytes=*/100);
  {
    Client client(server_->port());
    client.SendRaw("POST /v HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
    EXPECT_THAT(client.ReadAll(), StartsWith("HTTP/1.1 411 Length Required\r\n"));
  }
  {
    Client client(server_->port());
    client.SendRaw("POST /v HTTP/1.1\r\nContent-Length: 101\r\n\r\n");
    EXPECT_THAT(client.ReadAll(), StartsWith("HTTP/1.1 413 Payload Too Large\r\n"));
  }
  {
    Client client(server_->port());
    client.SendRaw("POST /v HTTP/1.1\r\nContent-Length: ten\r\n\r\n");
    EXPECT_THAT(client.ReadAll(), StartsWith("HTTP/1.1 400 Bad Request\r\n"));
  }
  EXPECT_EQ(handled.load(), 0);
}

TEST_F(HttpsServerTest, ServesACertificateGivenAsPemText) {
  testing_util::WriteSelfSignedCert(dir_);
  auto read = [](const std::string& path) {
    std::string out;
    FILE* f = fopen(path.c_str(), "r");
    char buf[4096];
    size_t n;
    while (f != nullptr && (n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
    if (f != nullptr) fclose(f);
    return out;
  };
  HttpsServerOptions o;
  o.cert_pem = read(dir_.File("cert.pem"));
  o.key_pem = read(dir_.File("key.pem"));
  absl::StatusOr<std::unique_ptr<HttpsServer>> s =
      HttpsServer::Start(o, [](const HttpsRequest&, HttpsReply& reply) { reply.Write("pem\n"); });
  ASSERT_TRUE(s.ok()) << s.status();
  Client client((*s)->port());
  ASSERT_TRUE(client.ok());
  client.Send("/x");
  EXPECT_THAT(client.ReadAll(), HasSubstr("pem\n"));

  HttpsServerOptions bad;
  bad.cert_pem = o.cert_pem;
  bad.key_pem = "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n";
  absl::StatusOr<std::unique_ptr<HttpsServer>> refused =
      HttpsServer::Start(bad, [](const HttpsRequest&, HttpsReply&) {});
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_TRUE(absl::IsInvalidArgument(
      HttpsServer::Start(HttpsServerOptions{}, [](const HttpsRequest&, HttpsReply&) {}).status()));
}

// The certificate a client is served (its DER bytes).
std::string PeerCertificate(int port) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  std::string der;
  SSL* ssl = SSL_new(ctx);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    SSL_set_fd(ssl, fd);
    if (SSL_connect(ssl) == 1) {
      X509* peer = SSL_get1_peer_certificate(ssl);
      unsigned char* out = nullptr;
      const int n = i2d_X509(peer, &out);
      if (n > 0) der.assign(reinterpret_cast<char*>(out), static_cast<size_t>(n));
      OPENSSL_free(out);
      X509_free(peer);
      SSL_shutdown(ssl);
    }
  }
  SSL_free(ssl);
  close(fd);
  SSL_CTX_free(ctx);
  return der;
}

TEST_F(HttpsServerTest, CertificateFilesRenewedInPlaceServeNewConnections) {
  StartServer([](const HttpsRequest&, HttpsReply& reply) { reply.Write("x"); });
  const std::string first = PeerCertificate(server_->port());
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(PeerCertificate(server_->port()), first);
  EXPECT_EQ(server_->reloads(), 0);
  // cert-manager renews the Secret; the kubelet swaps the mounted files.
  testing_util::WriteSelfSignedCert(dir_);
  const std::string second = PeerCertificate(server_->port());
  ASSERT_FALSE(second.empty());
  EXPECT_NE(second, first);
  EXPECT_EQ(server_->reloads(), 1);
  // A key that does not load (half written) keeps the certificate served.
  std::ofstream(dir_.File("key.pem")) << "-----BEGIN PRIVATE KEY-----\ntruncated";
  EXPECT_EQ(PeerCertificate(server_->port()), second);
  EXPECT_EQ(server_->reloads(), 1);
}

}  // namespace
}  // namespace kubetrain::kube
