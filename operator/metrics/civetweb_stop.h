// StopCivetwebPromptly: civetweb's listener thread notices a stop request
// only when its poll() returns, which on an idle server is after 2 s
// (SOCKET_TIMEOUT_QUANTUM). This runs the stop (mg_stop, or destroying a
// prometheus::Exposer) while connecting to the server's own port every
// 20 ms, so poll() returns and the stop completes in milliseconds. Used by
// MetricsEndpoint and the operator's HealthServer.
//
// Stateless free functions; thread-safe.
#ifndef KUBETRAIN_OPERATOR_METRICS_CIVETWEB_STOP_H_
#define KUBETRAIN_OPERATOR_METRICS_CIVETWEB_STOP_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

namespace kubetrain::operator_metrics {

// The host part of civetweb's listening_ports ("8080" -> "",
// "127.0.0.1:0" -> "127.0.0.1", "[::1]:8080" -> "[::1]").
inline std::string CivetwebHost(const std::string& listening_ports) {
  const size_t colon = listening_ports.rfind(':');
  return colon == std::string::npos ? "" : listening_ports.substr(0, colon);
}

// Opens and closes one TCP connection to `host`:`port`; "" and 0.0.0.0 mean
// 127.0.0.1, [::] means [::1]. Host names are not resolved (no poke).
inline void PokeListener(const std::string& host, int port) {
  sockaddr_storage storage{};
  socklen_t len = 0;
  if (!host.empty() && host.front() == '[') {
    std::string ip = host.substr(1, host.size() - 2);
    if (ip == "::") ip = "::1";
    auto* a = reinterpret_cast<sockaddr_in6*>(&storage);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET6, ip.c_str(), &a->sin6_addr) != 1) return;
    len = sizeof(*a);
  } else {
    const std::string ip = host.empty() || host == "0.0.0.0" ? "127.0.0.1" : host;
    auto* a = reinterpret_cast<sockaddr_in*>(&storage);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET, ip.c_str(), &a->sin_addr) != 1) return;
    len = sizeof(*a);
  }
  const int fd = socket(storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  (void)connect(fd, reinterpret_cast<const sockaddr*>(&storage), len);
  close(fd);
}

// Runs `stop` while poking `host`:`port` until it returns.
inline void StopCivetwebPromptly(const std::string& host, int port,
                                 const std::function<void()>& stop) {
  std::atomic<bool> done{false};
  std::thread poker([&] {
    while (!done.load()) {
      PokeListener(host, port);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  stop();
  done.store(true);
  poker.join();
}

}  // namespace kubetrain::operator_metrics

#endif  // KUBETRAIN_OPERATOR_METRICS_CIVETWEB_STOP_H_
