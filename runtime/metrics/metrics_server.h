// MetricsServer: serves a prometheus::Registry in the Prometheus text format
// at GET /metrics over HTTP/1.1 (one request per connection, then close).
//
// It is a small server of its own rather than prometheus-cpp's civetweb
// Exposer: civetweb starts its threads with a fixed ~100 KiB stack, and in a
// CUDA build this binary's static TLS (cuBLASLt and OpenBLAS, ~160 KiB)
// does not fit, so pthread_create fails with EINVAL ("Cannot create
// threads: error 0").
//
// Start() returns a Status when the address cannot be bound. One thread
// serves connections one at a time (a scrape takes well under a
// millisecond; a client that stalls is dropped after a 2 s read timeout);
// it starts with every signal blocked, so SIGTERM/SIGINT keep going to the
// thread that waits for them (the parameter server's loop). Destroying the
// object stops the thread and closes the socket.
// Thread-safe: port() may be called from any thread.
#ifndef KUBETRAIN_RUNTIME_METRICS_METRICS_SERVER_H_
#define KUBETRAIN_RUNTIME_METRICS_METRICS_SERVER_H_

#include <prometheus/registry.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace kubetrain::metrics {

class MetricsServer {
 public:
  // Listens on `address`:`port` (an IPv4 address such as "0.0.0.0" or
  // "127.0.0.1"); port 0 picks a free one.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& address, int port, std::shared_ptr<prometheus::Registry> registry);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // The port actually listened on.
  int port() const { return port_; }

 private:
  MetricsServer(int listen_fd, int wake_fd, int port,
                std::shared_ptr<prometheus::Registry> registry);
  void Serve();
  void HandleConnection(int fd);

  const int listen_fd_;
  const int wake_fd_;  // eventfd: written once to stop Serve()
  const int port_;
  const std::shared_ptr<prometheus::Registry> registry_;
  std::thread thread_;
};

// The response body for `registry` (Prometheus text format 0.0.4).
std::string SerializeMetrics(prometheus::Registry& registry);

}  // namespace kubetrain::metrics

#endif  // KUBETRAIN_RUNTIME_METRICS_METRICS_SERVER_H_
