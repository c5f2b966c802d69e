#include "runtime/metrics/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <prometheus/text_serializer.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kubetrain::metrics {
namespace {

constexpr int kReadTimeoutMs = 2000;
constexpr size_t kMaxRequestBytes = 8192;

absl::Status ErrnoError(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// Writes all of `data`; false when the peer went away.
bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string Response(const char* status, const char* content_type, const std::string& body) {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
}

}  // namespace

std::string SerializeMetrics(prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& address, int port, std::shared_ptr<prometheus::Registry> registry) {
  const std::string where = absl::StrCat(address, ":", port);
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("metrics port ", port, " is out of range"));
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", address, "' is not an IPv4 address"));
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoError("metrics socket");
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 16) != 0) {
    absl::Status s = ErrnoError(absl::StrCat("cannot serve metrics on ", where));
    close(fd);
    return s;
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int wake = eventfd(0, EFD_CLOEXEC);
  if (wake < 0) {
    absl::Status s = ErrnoError("metrics eventfd");
    close(fd);
    return s;
  }
  std::unique_ptr<MetricsServer> server(
      new MetricsServer(fd, wake, ntohs(addr.sin_port), std::move(registry)));
  // The serving thread inherits a full signal mask.
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &saved);
  server->thread_ = std::thread([s = server.get()] { s->Serve(); });
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  return server;
}

MetricsServer::MetricsServer(int listen_fd, int wake_fd, int port,
                             std::shared_ptr<prometheus::Registry> registry)
    : listen_fd_(listen_fd), wake_fd_(wake_fd), port_(port), registry_(std::move(registry)) {}

MetricsServer::~MetricsServer() {
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) < 0) {
    // Cannot happen for an eventfd below its maximum; the thread would
    // then still stop at process exit.
  }
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  close(wake_fd_);
}

void MetricsServer::Serve() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const int n = poll(fds, 2, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || (fds[1].revents & POLLIN) != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int conn = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    HandleConnection(conn);
    close(conn);
  }
}

void MetricsServer::HandleConnection(int fd) {
  // Read until the end of the request headers (or give up).
  std::string request;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kReadTimeoutMs);
  char buf[2048];
  while (!absl::StrContains(request, "\r\n\r\n") && request.size() < kMaxRequestBytes) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return;
    pollfd p = {fd, POLLIN, 0};
    pollfd w = {wake_fd_, POLLIN, 0};
    pollfd both[2] = {p, w};
    const int r = poll(both, 2, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0 || (both[1].revents & POLLIN) != 0) return;
    const ssize_t got = recv(fd, buf, sizeof(buf), 0);
    if (got <= 0) return;
    request.append(buf, static_cast<size_t>(got));
  }
  const size_t eol = request.find("\r\n");
  const std::string line = request.substr(0, eol);
  // "GET /metrics HTTP/1.1", possibly with a query string.
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
  if (sp2 == std::string::npos) {
    WriteAll(fd, Response("400 Bad Request", "text/plain", "bad request\n"));
    return;
  }
  const std::string method = line.substr(0, sp1);
  std::string path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  path = path.substr(0, path.find('?'));
  if (method != "GET" && method != "HEAD") {
    WriteAll(fd, Response("405 Method Not Allowed", "text/plain", "only GET\n"));
    return;
  }
  if (path != "/metrics") {
    WriteAll(fd, Response("404 Not Found", "text/plain", "metrics are at /metrics\n"));
    return;
  }
  std::string response =
      Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", SerializeMetrics(*registry_));
  if (method == "HEAD") response.resize(response.find("\r\n\r\n") + 4);
  WriteAll(fd, response);
}

}  // namespace kubetrain::metrics
