#include "testing/kube_emulator_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace kubetrain::testing {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Reads from fd until `buf` holds "\r\n\r\n"; false on EOF/error.
bool ReadHead(int fd, std::string& buf, size_t& head_end) {
  while (true) {
    size_t pos = buf.find("\r\n\r\n");
    if (pos != std::string::npos) {
      head_end = pos + 4;
      return true;
    }
    if (buf.size() > (1 << 20)) return false;
    char tmp[8192];
    ssize_t n = ::recv(fd, tmp, sizeof(tmp), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buf.append(tmp, static_cast<size_t>(n));
  }
}

}  // namespace

std::string UrlDecode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2])));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string HttpRequest::Header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

bool HttpConnection::Write(std::string_view bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    if (aborted_.load()) return false;
    ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

bool HttpConnection::PeerClosed(absl::Duration wait) {
  if (aborted_.load()) return true;
  pollfd p{.fd = fd_, .events = POLLIN | POLLRDHUP, .revents = 0};
  int ms = static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(wait)));
  int r = ::poll(&p, 1, ms);
  if (r <= 0) return aborted_.load();
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  if (p.revents & POLLIN) {
    // A pipelined request would be unusual during a watch; treat EOF as closed.
    char c;
    ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0;
  }
  return false;
}

void HttpConnection::Abort() {
  aborted_.store(true);
  ::shutdown(fd_, SHUT_RDWR);
}

absl::StatusOr<std::unique_ptr<EmulatorHttpServer>> EmulatorHttpServer::Start(int port,
                                                                              Handler handler) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 128) != 0) {
    std::string err = std::strerror(errno);
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("bind 127.0.0.1:", port, ": ", err));
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  std::unique_ptr<EmulatorHttpServer> server(
      new EmulatorHttpServer(fd, ntohs(addr.sin_port), std::move(handler)));
  if (::pipe2(server->wake_pipe_, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

EmulatorHttpServer::EmulatorHttpServer(int listen_fd, int port, Handler handler)
    : listen_fd_(listen_fd), port_(port), handler_(std::move(handler)) {}

EmulatorHttpServer::~EmulatorHttpServer() {
  Stop();
  ::close(listen_fd_);
  for (int fd : wake_pipe_) {
    if (fd >= 0) ::close(fd);
  }
}

void EmulatorHttpServer::Stop() {
  std::vector<Conn> conns;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && conns_.empty() && !accept_thread_.joinable()) return;
    stopping_ = true;
  }
  if (wake_pipe_[1] >= 0) {
    char c = 'x';
    [[maybe_unused]] ssize_t n = ::write(wake_pipe_[1], &c, 1);
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  {
    absl::MutexLock lock(&mu_);
    conns = std::move(conns_);
    conns_.clear();
  }
  for (Conn& c : conns) c.connection->Abort();
  for (Conn& c : conns) {
    if (c.thread.joinable()) c.thread.join();
  }
}

void EmulatorHttpServer::AcceptLoop() {
  while (true) {
    pollfd fds[2] = {{.fd = listen_fd_, .events = POLLIN, .revents = 0},
                     {.fd = wake_pipe_[0], .events = POLLIN, .revents = 0}};
    int r = ::poll(fds, 2, 1000);
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      // Reap finished connection threads.
      for (auto it = conns_.begin(); it != conns_.end();) {
        if (it->done->load()) {
          it->thread.join();
          it = conns_.erase(it);
        } else {
          ++it;
        }
      }
    }
    if (r <= 0 || !(fds[0].revents & POLLIN)) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto connection = std::make_shared<HttpConnection>(fd);
    auto done = std::make_shared<std::atomic<bool>>(false);
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    Conn c;
    c.connection = connection;
    c.done = done;
    c.fd = fd;
    c.thread = std::thread([this, fd, connection, done] {
      Serve(fd, connection);
      ::close(fd);
      done->store(true);
    });
    conns_.push_back(std::move(c));
  }
}

void EmulatorHttpServer::Serve(int fd, std::shared_ptr<HttpConnection> connection) {
  std::string buf;
  while (!connection->aborted()) {
    size_t head_end = 0;
    if (!ReadHead(fd, buf, head_end)) return;
    std::string head = buf.substr(0, head_end - 4);
    buf.erase(0, head_end);
    std::vector<std::string> lines = absl::StrSplit(head, "\r\n");
    if (lines.empty()) return;
    std::vector<std::string> first = absl::StrSplit(lines[0], ' ', absl::SkipEmpty());
    if (first.size() < 2) return;
    HttpRequest req;
    req.method = first[0];
    req.target = first[1];
    for (size_t i = 1; i < lines.size(); ++i) {
      size_t colon = lines[i].find(':');
      if (colon == std::string::npos) continue;
      std::string name = absl::AsciiStrToLower(lines[i].substr(0, colon));
      req.headers[name] = std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
    }
    size_t q = req.target.find('?');
    req.path = UrlDecode(req.target.substr(0, q), false);
    if (q != std::string::npos) {
      for (absl::string_view kv :
           absl::StrSplit(req.target.substr(q + 1), '&', absl::SkipEmpty())) {
        size_t eq = kv.find('=');
        std::string k = UrlDecode(std::string(kv.substr(0, eq)), true);
        std::string v =
            eq == absl::string_view::npos ? "" : UrlDecode(std::string(kv.substr(eq + 1)), true);
        req.query[k] = v;
      }
    }
    size_t content_length = 0;
    if (std::string cl = req.Header("content-length"); !cl.empty()) {
      if (!absl::SimpleAtoi(cl, &content_length)) return;
    }
    while (buf.size() < content_length) {
      char tmp[8192];
      ssize_t n = ::recv(fd, tmp, sizeof(tmp), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      buf.append(tmp, static_cast<size_t>(n));
    }
    req.body = buf.substr(0, content_length);
    buf.erase(0, content_length);
    handler_(req, *connection);
    if (connection->close_after() || connection->aborted() ||
        absl::AsciiStrToLower(req.Header("connection")) == "close") {
      ::shutdown(fd, SHUT_RDWR);
      return;
    }
  }
}

}  // namespace kubetrain::testing
