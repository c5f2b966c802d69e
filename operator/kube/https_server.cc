#include "operator/kube/https_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kubetrain::kube {
namespace {

std::string SslError() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "unknown TLS error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

const char* Reason(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 500:
      return "Internal Server Error";
    default:
      return "Error";
  }
}

// One TLS connection's reply: a chunked 200 on the first Write, or an error.
class TlsReply final : public HttpsReply {
 public:
  TlsReply(SSL* ssl, int fd, const std::atomic<bool>& stopping)
      : ssl_(ssl), fd_(fd), stopping_(stopping) {}

  bool Write(std::string_view bytes) override {
    if (failed_) return false;
    std::string out;
    if (!started_) {
      started_ = true;
      out =
          "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n"
          "Connection: close\r\n\r\n";
    }
    if (!bytes.empty()) {
      absl::StrAppend(&out, absl::Hex(bytes.size()), "\r\n",
                      absl::string_view(bytes.data(), bytes.size()), "\r\n");
    }
    return Send(out);
  }

  void Fail(int code, const std::string& text) override {
    Respond(code, "text/plain; charset=utf-8", text);
  }

  void Respond(int code, const std::string& content_type, const std::string& body) override {
    if (started_) return;
    started_ = true;
    ended_ = true;
    Send(absl::StrCat("HTTP/1.1 ", code, " ", Reason(code), "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body));
  }

  bool Gone(absl::Duration wait) override {
    if (failed_ || stopping_.load()) return true;
    pollfd p{fd_, POLLIN | POLLRDHUP, 0};
    const int r = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(wait)));
    if (stopping_.load()) return true;
    if (r <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return failed_ = true;
    // Readable: a close_notify or stray bytes; a read that ends is the end.
    char buf[256];
    const int n = SSL_read(ssl_, buf, sizeof(buf));
    if (n <= 0) return failed_ = true;
    return false;
  }

  // The end of a chunked body; nothing for an error or a failed connection.
  void Finish() {
    if (!started_) Write("");
    if (!ended_ && !failed_) Send("0\r\n\r\n");
  }

 private:
  bool Send(std::string_view bytes) {
    while (!bytes.empty() && !failed_) {
      const int n = SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size()));
      if (n <= 0) {
        failed_ = true;
        break;
      }
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return !failed_;
  }

  SSL* ssl_;
  int fd_;
  const std::atomic<bool>& stopping_;
  bool started_ = false, ended_ = false, failed_ = false;
};

}  // namespace

std::string PercentDecode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && absl::ascii_isxdigit(s[i + 1]) &&
        absl::ascii_isxdigit(s[i + 2])) {
      auto hex = [](char c) { return absl::ascii_isdigit(c) ? c - '0' : (c | 0x20) - 'a' + 10; };
      out.push_back(static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2])));
      i += 2;
    } else if (s[i] == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

namespace {

// The certificate chain and key, from files or PEM text.
absl::Status LoadCertificate(SSL_CTX* ctx, const HttpsServerOptions& options) {
  if (!options.cert_file.empty() || !options.key_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, options.cert_file.c_str()) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("certificate ", options.cert_file, ": ", SslError()));
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, options.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("private key ", options.key_file, ": ", SslError()));
    }
    return absl::OkStatus();
  }
  if (options.cert_pem.empty() || options.key_pem.empty()) {
    return absl::InvalidArgumentError("no certificate: neither files nor PEM text given");
  }
  BIO* certs = BIO_new_mem_buf(options.cert_pem.data(), static_cast<int>(options.cert_pem.size()));
  X509* leaf = PEM_read_bio_X509(certs, nullptr, nullptr, nullptr);
  bool ok = leaf != nullptr && SSL_CTX_use_certificate(ctx, leaf) == 1;
  X509_free(leaf);
  // The rest of the chain, if any.
  while (ok) {
    X509* extra = PEM_read_bio_X509(certs, nullptr, nullptr, nullptr);
    if (extra == nullptr) {
      ERR_clear_error();  // the end of the text
      break;
    }
    if (SSL_CTX_add0_chain_cert(ctx, extra) != 1) {
      X509_free(extra);
      ok = false;
    }
  }
  BIO_free(certs);
  if (!ok) return absl::InvalidArgumentError(absl::StrCat("certificate PEM: ", SslError()));
  BIO* key_bio = BIO_new_mem_buf(options.key_pem.data(), static_cast<int>(options.key_pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr);
  BIO_free(key_bio);
  ok = key != nullptr && SSL_CTX_use_PrivateKey(ctx, key) == 1 &&
       SSL_CTX_check_private_key(ctx) == 1;
  EVP_PKEY_free(key);
  if (!ok) return absl::InvalidArgumentError(absl::StrCat("private key PEM: ", SslError()));
  return absl::OkStatus();
}

}  // namespace

// A server context holding the options' certificate.
absl::StatusOr<SSL_CTX*> NewContext(const HttpsServerOptions& options) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return absl::InternalError(absl::StrCat("TLS: ", SslError()));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (absl::Status s = LoadCertificate(ctx, options); !s.ok()) {
    SSL_CTX_free(ctx);
    return s;
  }
  return ctx;
}

// The files' modification times, "" when either cannot be read.
std::string FileStamps(const HttpsServerOptions& options) {
  std::string out;
  for (const std::string* f : {&options.cert_file, &options.key_file}) {
    struct stat st {};
    if (stat(f->c_str(), &st) != 0) return "";
    absl::StrAppend(&out, st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec, "/", st.st_size, ";");
  }
  return out;
}

absl::StatusOr<std::unique_ptr<HttpsServer>> HttpsServer::Start(const HttpsServerOptions& options,
                                                                Handler handler) {
  const std::string stamps = options.cert_file.empty() ? "" : FileStamps(options);
  absl::StatusOr<SSL_CTX*> made = NewContext(options);
  if (!made.ok()) return made.status();
  SSL_CTX* ctx = *made;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(options.port));
  if (inet_pton(AF_INET, options.host.c_str(), &addr.sin_addr) != 1) {
    SSL_CTX_free(ctx);
    return absl::InvalidArgumentError(absl::StrCat("not an IPv4 address: ", options.host));
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 64) != 0) {
    const std::string e = std::strerror(errno);
    if (fd >= 0) close(fd);
    SSL_CTX_free(ctx);
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.host, ":", options.port, ": ", e));
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  std::unique_ptr<HttpsServer> server(
      new HttpsServer(ctx, fd, ntohs(addr.sin_port), options, std::move(handler)));
  {
    absl::MutexLock lock(&server->ctx_mu_);
    server->stamps_ = stamps;
  }
  if (pipe2(server->wake_pipe_, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

HttpsServer::HttpsServer(ssl_ctx_st* ctx, int listen_fd, int port,
                         const HttpsServerOptions& options, Handler handler)
    : options_(options),
      listen_fd_(listen_fd),
      port_(port),
      max_body_bytes_(options.max_body_bytes),
      handler_(std::move(handler)),
      ctx_(ctx) {}

ssl_ctx_st* HttpsServer::Context() {
  absl::MutexLock lock(&ctx_mu_);
  // Certificate files renewed in place (cert-manager, a mounted Secret):
  // new connections get the new certificate, as controller-runtime's
  // certwatcher does. A pair that does not load (half written) keeps the
  // old one until the next look.
  if (!options_.cert_file.empty()) {
    const std::string stamps = FileStamps(options_);
    if (!stamps.empty() && stamps != stamps_) {
      absl::StatusOr<SSL_CTX*> made = NewContext(options_);
      if (made.ok()) {
        SSL_CTX_free(ctx_);
        ctx_ = *made;
        stamps_ = stamps;
        ++reloads_;
      }
    }
  }
  SSL_CTX_up_ref(ctx_);
  return ctx_;
}

int HttpsServer::reloads() const {
  absl::MutexLock lock(&ctx_mu_);
  return reloads_;
}

HttpsServer::~HttpsServer() {
  Stop();
  if (wake_pipe_[0] >= 0) close(wake_pipe_[0]);
  if (wake_pipe_[1] >= 0) close(wake_pipe_[1]);
  close(listen_fd_);
  absl::MutexLock lock(&ctx_mu_);
  SSL_CTX_free(ctx_);
}

void HttpsServer::Stop() {
  std::vector<Conn> conns;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    stopping_.store(true);
    for (Conn& c : conns_) shutdown(c.fd, SHUT_RDWR);
    conns = std::move(conns_);
    conns_.clear();
  }
  if (wake_pipe_[1] >= 0) (void)!write(wake_pipe_[1], "x", 1);
  if (accept_thread_.joinable()) accept_thread_.join();
  {
    // Connections accepted while stopping.
    absl::MutexLock lock(&mu_);
    for (Conn& c : conns_) shutdown(c.fd, SHUT_RDWR);
    for (Conn& c : conns_) conns.push_back(std::move(c));
    conns_.clear();
  }
  for (Conn& c : conns) {
    c.thread.join();
    close(c.fd);
  }
}

void HttpsServer::AcceptLoop() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    if (poll(p, 2, -1) < 0 && errno != EINTR) return;
    if (stopping_.load() || (p[1].revents & POLLIN)) return;
    if (!(p[0].revents & POLLIN)) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    absl::MutexLock lock(&mu_);
    // Reap finished connections.
    for (auto it = conns_.begin(); it != conns_.end();) {
      if (it->done->load()) {
        it->thread.join();
        close(it->fd);
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
    Conn c;
    c.fd = fd;
    c.done = std::make_shared<std::atomic<bool>>(false);
    c.thread = std::thread([this, fd, done = c.done] {
      Serve(fd);
      done->store(true);
    });
    conns_.push_back(std::move(c));
  }
}

void HttpsServer::Serve(int fd) {
  // A write to a client that went away fails with EPIPE instead of killing the
  // agent; the signal stays pending on this thread, which ends with the
  // connection. (Ignoring SIGPIPE process-wide would pass SIG_IGN on to the
  // containers.)
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
  // A client that sends nothing does not hold the thread for ever.
  timeval tv{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  SSL_CTX* ctx = Context();
  SSL* ssl = SSL_new(ctx);
  SSL_CTX_free(ctx);  // the connection holds its own reference
  SSL_set_fd(ssl, fd);
  std::string head;
  bool ok = SSL_accept(ssl) == 1;
  while (ok && head.find("\r\n\r\n") == std::string::npos && head.size() < 64 * 1024) {
    char buf[4096];
    const int n = SSL_read(ssl, buf, sizeof(buf));
    if (n <= 0) {
      ok = false;
      break;
    }
    head.append(buf, static_cast<size_t>(n));
  }
  const size_t head_end = head.find("\r\n\r\n");
  if (ok && head_end != std::string::npos) {
    HttpsRequest request;
    TlsReply reply(ssl, fd, stopping_);
    std::vector<std::string> lines = absl::StrSplit(head.substr(0, head_end), "\r\n");
    std::vector<std::string> parts = absl::StrSplit(lines[0], ' ');
    for (size_t i = 1; i < lines.size(); ++i) {
      const size_t colon = lines[i].find(':');
      if (colon == std::string::npos) continue;
      request.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
          std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
    }
    // The body: what came with the head, then the rest by Content-Length.
    request.body = head.substr(head_end + 4);
    size_t length = 0;
    const auto te = request.headers.find("transfer-encoding");
    const auto cl = request.headers.find("content-length");
    const bool chunked = te != request.headers.end() && te->second != "identity";
    const bool bad_length = cl != request.headers.end() && !absl::SimpleAtoi(cl->second, &length);
    if (!chunked && !bad_length && length > max_body_bytes_) {
      reply.Fail(413,
                 absl::StrCat("a body of ", length, " bytes; at most ", max_body_bytes_, "\n"));
    } else if (!chunked && !bad_length) {
      while (request.body.size() < length) {
        char buf[16384];
        const int n = SSL_read(ssl, buf, sizeof(buf));
        if (n <= 0) {
          ok = false;
          break;
        }
        request.body.append(buf, static_cast<size_t>(n));
      }
      request.body.resize(std::min(request.body.size(), length));
    }
    tv = {0, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (!ok) {
      // The client went away mid-body: nobody to answer.
    } else if (chunked) {
      reply.Fail(411, "a chunked request body is not supported; send Content-Length\n");
    } else if (bad_length) {
      reply.Fail(400, "malformed Content-Length\n");
    } else if (parts.size() != 3) {
      reply.Fail(400, "malformed request line\n");
    } else if (length <= max_body_bytes_) {
      request.method = parts[0];
      const std::string& target = parts[1];
      const size_t q = target.find('?');
      request.path = PercentDecode(target.substr(0, q), false);
      if (q != std::string::npos) {
        for (absl::string_view kv : absl::StrSplit(target.substr(q + 1), '&', absl::SkipEmpty())) {
          std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
          request.query[PercentDecode(p.first, true)] = PercentDecode(p.second, true);
        }
      }
      handler_(request, reply);
    }
    if (ok) reply.Finish();
    SSL_shutdown(ssl);
  }
  SSL_free(ssl);
  // Closed by whoever joins this thread, so Stop() never shuts down a reused
  // descriptor.
  shutdown(fd, SHUT_RDWR);
}

}  // namespace kubetrain::kube
