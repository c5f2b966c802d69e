#include "tools/node_agent/kubelet_server.h"

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

#include "tests/support/self_signed_cert.h"
#include "tests/support/temp_files.h"
#include "tests/support/wait_for.h"

namespace kubetrain::node_agent {
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
    const std::string req = "GET " + target + " HTTP/1.1\r\nHost: node\r\n\r\n";
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

class KubeletServerTest : public ::testing::Test {
 protected:
  void StartServer(KubeletServer::Handler handler) {
    testing_util::WriteSelfSignedCert(dir_);
    KubeletServerOptions o;
    o.cert_file = dir_.File("cert.pem");
    o.key_file = dir_.File("key.pem");
    absl::StatusOr<std::unique_ptr<KubeletServer>> s = KubeletServer::Start(o, std::move(handler));
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  data::testing_util::TempDir dir_;
  std::unique_ptr<KubeletServer> server_;
};

TEST_F(KubeletServerTest, ServesAChunkedAnswerOverTlsWithTheDecodedRequest) {
  KubeletRequest seen;
  StartServer([&](const KubeletRequest& r, KubeletReply& reply) {
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

TEST_F(KubeletServerTest, AnErrorHasItsCodeAndText) {
  StartServer([](const KubeletRequest&, KubeletReply& reply) {
    reply.Fail(404, "pod \"x\" does not exist");
  });
  Client client(server_->port());
  client.Send("/containerLogs/a/x/c");
  const std::string got = client.ReadAll();
  EXPECT_THAT(got, StartsWith("HTTP/1.1 404 Not Found\r\n"));
  EXPECT_THAT(got, HasSubstr("\r\n\r\npod \"x\" does not exist"));
}

TEST_F(KubeletServerTest, AHandlerSeesTheClientGoAwayAndStopEndsAFollow) {
  std::atomic<int> ended{0};
  StartServer([&](const KubeletRequest&, KubeletReply& reply) {
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

}  // namespace
}  // namespace kubetrain::node_agent
