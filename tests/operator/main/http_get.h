// HttpGet: one plain HTTP/1.0 request to a loopback server, read to the
// end, for tests of the operator's /metrics, /healthz and /readyz. Stateless
// and thread-safe.
#ifndef KUBETRAIN_TESTS_OPERATOR_MAIN_HTTP_GET_H_
#define KUBETRAIN_TESTS_OPERATOR_MAIN_HTTP_GET_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

namespace kubetrain::operator_main::test_util {

struct HttpAnswer {
  int code = 0;  // 0: no answer (connection refused, timeout, garbage)
  std::string body;
};

inline HttpAnswer HttpGet(int port, const std::string& path, const std::string& method = "GET",
                          std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  HttpAnswer answer;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return answer;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return answer;
  }
  const std::string request = method + " " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return answer;
  }
  std::string raw;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      close(fd);
      return answer;
    }
    pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0) {
      close(fd);
      return answer;
    }
    if (n == 0) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  // "HTTP/1.1 200 OK\r\n...\r\n\r\nbody"
  const size_t space = raw.find(' ');
  const size_t end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/", 0) != 0 || space == std::string::npos || end == std::string::npos) {
    return answer;
  }
  answer.code = std::atoi(raw.c_str() + space + 1);
  answer.body = raw.substr(end + 4);
  return answer;
}

}  // namespace kubetrain::operator_main::test_util

#endif  // KUBETRAIN_TESTS_OPERATOR_MAIN_HTTP_GET_H_
