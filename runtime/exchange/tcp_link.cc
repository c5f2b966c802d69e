#include "runtime/exchange/tcp_link.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kubetrain::exchange {
namespace {

constexpr int kPollMillis = 100;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void SetNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

// Connected sockets block, with send and receive timeouts of one poll
// interval: a large transfer is then one system call that the kernel fills
// (MSG_WAITALL) instead of a read, a poll and a wake-up per 64 KB segment,
// and the caller's check still runs every interval while a peer is silent.
void TuneSocket(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) & ~O_NONBLOCK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  timeval tv{0, kPollMillis * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

absl::Status Errno(const std::string& what) {
  const int e = errno;
  if (e == EPIPE || e == ECONNRESET || e == ENOTCONN || e == ECONNREFUSED || e == ETIMEDOUT ||
      e == EHOSTUNREACH || e == ENETUNREACH) {
    return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(e)));
  }
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(e)));
}

}  // namespace

absl::Status SplitHostPort(const std::string& address, std::string* host, int* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    return absl::InvalidArgumentError(absl::StrCat("address '", address, "' has no port"));
  }
  std::string h = address.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  int p = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &p) || p <= 0 || p > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("address '", address, "' has a bad port"));
  }
  *host = h;
  *port = p;
  return absl::OkStatus();
}

TcpConnection::TcpConnection(int fd) : fd_(fd) {}

TcpConnection::~TcpConnection() {
  if (fd_ >= 0) close(fd_);
}

TcpConnection::TcpConnection(TcpConnection&& other) noexcept { *this = std::move(other); }

TcpConnection& TcpConnection::operator=(TcpConnection&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    max_send_rate_ = other.max_send_rate_;
    throttle_start_ = other.throttle_start_;
    throttle_bytes_ = other.throttle_bytes_;
    other.fd_ = -1;
  }
  return *this;
}

absl::StatusOr<TcpConnection> TcpConnection::Connect(const std::string& address,
                                                     double timeout_seconds, const IoCheck& check) {
  std::string host;
  int port = 0;
  if (absl::Status s = SplitHostPort(address, &host, &port); !s.ok()) return s;
  const double deadline = Now() + timeout_seconds;
  std::string last_error = "no attempt";
  while (true) {
    if (check) {
      if (absl::Status s = check(); !s.ok()) return s;
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int gai = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (gai != 0) {
      last_error = absl::StrCat("cannot resolve '", host, "': ", gai_strerror(gai));
    } else {
      for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
        const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) continue;
        SetNonBlocking(fd);
        int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
          pollfd p{fd, POLLOUT, 0};
          const int left = static_cast<int>(std::max(0.0, deadline - Now()) * 1000);
          rc = poll(&p, 1, std::min(left, 2000)) == 1 ? 0 : -1;
          int err = 0;
          socklen_t len = sizeof(err);
          if (rc == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0) {
            errno = err;
            rc = -1;
          } else if (rc != 0) {
            errno = ETIMEDOUT;
          }
        }
        if (rc == 0) {
          freeaddrinfo(res);
          TuneSocket(fd);
          return TcpConnection(fd);
        }
        last_error = std::strerror(errno);
        close(fd);
      }
      freeaddrinfo(res);
    }
    if (Now() >= deadline) {
      return absl::UnavailableError(absl::StrCat("cannot connect to ", address, " within ",
                                                 timeout_seconds, "s: ", last_error));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // connection backoff
  }
}

absl::Status TcpConnection::Throttle(size_t n, const IoCheck& check) {
  if (max_send_rate_ <= 0) return absl::OkStatus();
  if (throttle_start_ < 0) throttle_start_ = Now();
  throttle_bytes_ += static_cast<double>(n);
  // The link is busy until the bytes sent so far have drained at its rate.
  while (true) {
    const double ready_at = throttle_start_ + throttle_bytes_ / max_send_rate_;
    const double wait = ready_at - Now();
    if (wait <= 0) return absl::OkStatus();
    if (check) {
      if (absl::Status s = check(); !s.ok()) return s;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(wait, 0.05)));
  }
}

absl::Status TcpConnection::SendAll(const void* data, size_t n, const IoCheck& check) {
  if (fd_ < 0) return absl::FailedPreconditionError("connection is closed");
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    // Throttled links send in slices so the rate cap is smooth.
    const size_t slice = max_send_rate_ > 0 ? std::min<size_t>(n, 64 * 1024) : n;
    const ssize_t w = send(fd_, p, slice, MSG_NOSIGNAL);
    if (w > 0) {
      if (absl::Status s = Throttle(static_cast<size_t>(w), check); !s.ok()) return s;
      p += w;
      n -= static_cast<size_t>(w);
      if (n > 0 && check) {  // a send cut short by the timeout
        if (absl::Status s = check(); !s.ok()) return s;
      }
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {  // the send timeout
      if (check) {
        if (absl::Status s = check(); !s.ok()) return s;
      }
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    return Errno("send");
  }
  return absl::OkStatus();
}

absl::Status TcpConnection::SendAll(const void* head, size_t head_n, const void* body,
                                    size_t body_n, const IoCheck& check) {
  if (fd_ < 0) return absl::FailedPreconditionError("connection is closed");
  if (max_send_rate_ > 0) {  // the throttle meters plain sends
    if (absl::Status s = SendAll(head, head_n, check); !s.ok()) return s;
    return SendAll(body, body_n, check);
  }
  iovec iov[2] = {{const_cast<void*>(head), head_n}, {const_cast<void*>(body), body_n}};
  int first = 0;
  while (first < 2) {
    msghdr msg{};
    msg.msg_iov = iov + first;
    msg.msg_iovlen = static_cast<size_t>(2 - first);
    const ssize_t w = sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return Errno("send");
    }
    size_t sent = w > 0 ? static_cast<size_t>(w) : 0;
    while (first < 2 && sent >= iov[first].iov_len) {
      sent -= iov[first].iov_len;
      ++first;
    }
    if (first < 2) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + sent;
      iov[first].iov_len -= sent;
      if (check) {  // a send cut short by the timeout
        if (absl::Status s = check(); !s.ok()) return s;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status TcpConnection::RecvAll(void* data, size_t n, const IoCheck& check) {
  if (fd_ < 0) return absl::FailedPreconditionError("connection is closed");
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = recv(fd_, p, n, MSG_WAITALL);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      if (n > 0 && check) {  // the receive timeout cut it short
        if (absl::Status s = check(); !s.ok()) return s;
      }
      continue;
    }
    if (r == 0) return absl::UnavailableError("the peer closed the connection");
    if (errno == EAGAIN || errno == EWOULDBLOCK) {  // the receive timeout
      if (check) {
        if (absl::Status s = check(); !s.ok()) return s;
      }
      continue;
    }
    if (errno == EINTR) continue;
    return Errno("recv");
  }
  return absl::OkStatus();
}

void TcpConnection::Shutdown() {
  if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);
}

bool TcpConnection::PeerHungUp() const {
  if (fd_ < 0) return true;
  pollfd p{fd_, POLLRDHUP, 0};
  if (poll(&p, 1, 0) < 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

void TcpConnection::SetKeepAlive(int idle_seconds, int interval_seconds, int count) {
  if (fd_ < 0) return;
  const int one = 1;
  setsockopt(fd_, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  setsockopt(fd_, IPPROTO_TCP, TCP_KEEPIDLE, &idle_seconds, sizeof(idle_seconds));
  setsockopt(fd_, IPPROTO_TCP, TCP_KEEPINTVL, &interval_seconds, sizeof(interval_seconds));
  setsockopt(fd_, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  const unsigned int user_timeout_ms =
      static_cast<unsigned int>(idle_seconds + interval_seconds * count) * 1000u;
  setsockopt(fd_, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof(user_timeout_ms));
}

TcpListener::~TcpListener() {
  if (fd_ >= 0) close(fd_);
}

TcpListener::TcpListener(TcpListener&& other) noexcept { *this = std::move(other); }

TcpListener& TcpListener::operator=(TcpListener&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    port_ = other.port_;
    other.fd_ = -1;
  }
  return *this;
}

absl::StatusOr<TcpListener> TcpListener::Listen(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
  addrinfo* res = nullptr;
  const int gai = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (gai != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot listen on '", host, "': ", gai_strerror(gai)));
  }
  const int fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
  if (fd < 0) {
    freeaddrinfo(res);
    return Errno("socket");
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 64) != 0) {
    absl::Status s = Errno(absl::StrCat("cannot listen on ", host, ":", port));
    freeaddrinfo(res);
    close(fd);
    return s;
  }
  freeaddrinfo(res);
  SetNonBlocking(fd);
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  TcpListener l;
  l.fd_ = fd;
  l.port_ = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                       : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return l;
}

absl::StatusOr<TcpConnection> TcpListener::Accept(double timeout_seconds, const IoCheck& check) {
  if (fd_ < 0) return absl::FailedPreconditionError("listener is closed");
  const double deadline = Now() + timeout_seconds;
  while (true) {
    const int fd = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      TuneSocket(fd);
      return TcpConnection(fd);
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
      return Errno("accept");
    }
    if (Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("no connection within ", timeout_seconds, "s"));
    }
    if (check) {
      if (absl::Status s = check(); !s.ok()) return s;
    }
    pollfd p{fd_, POLLIN, 0};
    poll(&p, 1, kPollMillis);
  }
}

}  // namespace kubetrain::exchange
