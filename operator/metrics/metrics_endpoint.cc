#include "operator/metrics/metrics_endpoint.h"

#include <exception>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "operator/metrics/civetweb_stop.h"

namespace kubetrain::operator_metrics {

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& listening_ports, const std::string& display,
    std::shared_ptr<prometheus::Registry> registry) {
  std::unique_ptr<prometheus::Exposer> exposer;
  std::vector<int> ports;
  try {
    exposer = std::make_unique<prometheus::Exposer>(
        std::vector<std::string>{"listening_ports", listening_ports, "num_threads", "2"});
    exposer->RegisterCollectable(registry, "/metrics");
    ports = exposer->GetListeningPorts();
  } catch (const std::exception& e) {
    // civetweb's message ("null context when constructing CivetServer...")
    // says little; the address is what the user can act on.
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", display, " (is the address in use or not local?): ", e.what()));
  }
  if (ports.empty()) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", display, ": the server listens on no port"));
  }
  return std::unique_ptr<MetricsEndpoint>(new MetricsEndpoint(
      std::move(exposer), std::move(registry), CivetwebHost(listening_ports), ports.front()));
}

MetricsEndpoint::MetricsEndpoint(std::unique_ptr<prometheus::Exposer> exposer,
                                 std::shared_ptr<prometheus::Registry> registry, std::string host,
                                 int port)
    : exposer_(std::move(exposer)),
      host_(std::move(host)),
      registry_(std::move(registry)),
      port_(port) {}

MetricsEndpoint::~MetricsEndpoint() {
  StopCivetwebPromptly(host_, port_, [this] { exposer_.reset(); });
}

}  // namespace kubetrain::operator_metrics
