// HealthServer: the operator's probe endpoints over HTTP (civetweb), for the
// kubelet's liveness and readiness probes:
//   GET /healthz -> 200 "ok" while `checks.live` is OK, else 500 with why;
//   GET /readyz  -> 200 "ok" while `checks.ready` is OK, else 503 with why;
//   other paths 404, other methods 405 (HEAD answers as GET, without body).
//
// Thread-safe: the checks run on civetweb's threads, concurrently, and must
// be thread-safe themselves. Destruction stops the server, in milliseconds
// (operator/metrics/civetweb_stop.h), and waits for requests in flight,
// after which the checks are no longer called.
#ifndef KUBETRAIN_OPERATOR_HEALTH_SERVER_H_
#define KUBETRAIN_OPERATOR_HEALTH_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct mg_context;
struct mg_connection;

namespace kubetrain::operator_main {

struct HealthChecks {
  std::function<absl::Status()> live;   // null: always live
  std::function<absl::Status()> ready;  // null: always ready
};

class HealthServer {
 public:
  // `listening_ports` in civetweb's form ("8081", "127.0.0.1:0"); `display`
  // is the address as given, for messages. A bind failure is a Status that
  // names the address.
  static absl::StatusOr<std::unique_ptr<HealthServer>> Start(const std::string& listening_ports,
                                                             const std::string& display,
                                                             HealthChecks checks);
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  int port() const { return port_; }

 private:
  explicit HealthServer(HealthChecks checks) : checks_(std::move(checks)) {}
  static int Handle(mg_connection* conn, void* self);

  const HealthChecks checks_;
  std::string host_;  // as in listening_ports: "" = every interface
  mg_context* context_ = nullptr;
  int port_ = 0;
};

}  // namespace kubetrain::operator_main

#endif  // KUBETRAIN_OPERATOR_HEALTH_SERVER_H_
