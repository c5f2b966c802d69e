// Direct TCP links for the data planes of allreduce and the parameter server
// (as Gloo and ps-lite do): a listener on an ephemeral port, connections
// whose blocking sends and receives time out every 100 ms to run a
// caller-supplied check, so a transfer stuck on a silent or aborted peer
// stops with that check's error instead of hanging.
// TcpConnection and TcpListener are move-only owners of their socket; one
// thread sends and another receives on the same connection safely, but two
// threads must not send (or receive) on it at once.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_TCP_LINK_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_TCP_LINK_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kubetrain::exchange {

// Called while a transfer waits: a non-OK status abandons it with that
// status (the peer was declared lost, the job aborted). May be empty.
using IoCheck = std::function<absl::Status()>;

class TcpConnection {
 public:
  TcpConnection() = default;
  explicit TcpConnection(int fd);
  ~TcpConnection();
  TcpConnection(TcpConnection&& other) noexcept;
  TcpConnection& operator=(TcpConnection&& other) noexcept;
  TcpConnection(const TcpConnection&) = delete;
  TcpConnection& operator=(const TcpConnection&) = delete;

  // Connects to "host:port" ("[v6]:port" too), retrying refused connections
  // until `timeout_seconds` (the peer may still be starting).
  static absl::StatusOr<TcpConnection> Connect(const std::string& address, double timeout_seconds,
                                               const IoCheck& check);

  bool valid() const { return fd_ >= 0; }
  // Sends or receives exactly `n` bytes. Unavailable when the peer closed
  // or reset the connection.
  absl::Status SendAll(const void* data, size_t n, const IoCheck& check);
  // A header and a body in one system call (and one segment when they
  // fit), instead of a tiny packet for the header.
  absl::Status SendAll(const void* head, size_t head_n, const void* body, size_t body_n,
                       const IoCheck& check);
  absl::Status RecvAll(void* data, size_t n, const IoCheck& check);
  // Wakes any thread blocked on this connection; later I/O fails.
  void Shutdown();
  // True when the peer has closed or reset its end (or the socket failed),
  // without reading: a server waiting to answer asks it so it stops
  // waiting for a caller that went away. Never blocks.
  bool PeerHungUp() const;
  // Dead-peer detection, as gRPC's keepalive gives its channels: probe after
  // `idle_seconds` without traffic, every `interval_seconds`, and fail the
  // connection after `count` unanswered probes; and fail it as well when
  // sent data stays unacknowledged for idle + interval * count seconds
  // (TCP_USER_TIMEOUT). Keepalive alone never runs while data is in flight,
  // so a send to a peer whose address vanished (a pod recreated elsewhere)
  // would otherwise retransmit for many minutes. A live peer that is only
  // slow to answer acknowledges the probes and is not affected.
  void SetKeepAlive(int idle_seconds, int interval_seconds, int count);

  // Test hook: caps the send rate (bytes/s, 0 = unlimited) to emulate a
  // slow network link on loopback.
  void set_max_send_rate(double bytes_per_second) { max_send_rate_ = bytes_per_second; }

 private:
  absl::Status Throttle(size_t n, const IoCheck& check);

  int fd_ = -1;
  double max_send_rate_ = 0;
  double throttle_start_ = -1;
  double throttle_bytes_ = 0;
};

class TcpListener {
 public:
  TcpListener() = default;
  ~TcpListener();
  TcpListener(TcpListener&& other) noexcept;
  TcpListener& operator=(TcpListener&& other) noexcept;
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  // Listens on `host` ("0.0.0.0", "127.0.0.1", "::") and `port` (0 picks a
  // free one; port() says which).
  static absl::StatusOr<TcpListener> Listen(const std::string& host, int port);

  int port() const { return port_; }
  // Waits up to `timeout_seconds` for the next connection.
  absl::StatusOr<TcpConnection> Accept(double timeout_seconds, const IoCheck& check);

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Splits "host:port" / "[v6]:port".
absl::Status SplitHostPort(const std::string& address, std::string* host, int* port);

}  // namespace kubetrain::exchange

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_TCP_LINK_H_
