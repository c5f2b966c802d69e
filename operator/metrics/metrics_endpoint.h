// MetricsEndpoint: serves a prometheus::Registry at GET /metrics with
// prometheus-cpp's Exposer (civetweb). Start() turns the Exposer's
// exceptions (an address in use, a bad address) into a Status that names
// the address, so none crosses this boundary.
//
// Thread-safe: port() from any thread. Destruction stops the server, in
// milliseconds (civetweb_stop.h), and waits for scrapes in flight.
#ifndef KUBETRAIN_OPERATOR_METRICS_METRICS_ENDPOINT_H_
#define KUBETRAIN_OPERATOR_METRICS_METRICS_ENDPOINT_H_

#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace kubetrain::operator_metrics {

class MetricsEndpoint {
 public:
  // `listening_ports` in civetweb's form ("8080", "127.0.0.1:0"); `display`
  // is the address as the user gave it, for messages.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& listening_ports, const std::string& display,
      std::shared_ptr<prometheus::Registry> registry);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // The port actually listened on (the chosen one for port 0).
  int port() const { return port_; }

 private:
  MetricsEndpoint(std::unique_ptr<prometheus::Exposer> exposer,
                  std::shared_ptr<prometheus::Registry> registry, std::string host, int port);

  std::unique_ptr<prometheus::Exposer> exposer_;
  const std::string host_;                          // as in listening_ports: "" = every interface
  std::shared_ptr<prometheus::Registry> registry_;  // the Exposer holds only a weak_ptr
  const int port_;
};

}  // namespace kubetrain::operator_metrics

#endif  // KUBETRAIN_OPERATOR_METRICS_METRICS_ENDPOINT_H_
