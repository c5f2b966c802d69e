#include "runtime/exchange/exchange_backend.h"

namespace kubetrain::exchange {
namespace {

constexpr ExchangeBackendCandidate kCandidates[] = {
    {ExchangeBackend::kParameterServer, "ps",
     [](const ClusterShape& s) { return s.has_cluster && s.ps_replicas > 0; }},
    {ExchangeBackend::kAllreduce, "allreduce",
     [](const ClusterShape& s) { return s.has_cluster && s.ps_replicas == 0; }},
    {ExchangeBackend::kLocal, "local", [](const ClusterShape&) { return true; }},
};

}  // namespace

std::span<const ExchangeBackendCandidate> ExchangeBackendCandidates() { return kCandidates; }

ExchangeBackend ChooseExchangeBackend(const ClusterShape& shape) {
  for (const ExchangeBackendCandidate& c : kCandidates) {
    if (c.fits(shape)) return c.backend;
  }
  return ExchangeBackend::kLocal;
}

std::string ExchangeBackendName(ExchangeBackend backend) {
  for (const ExchangeBackendCandidate& c : kCandidates) {
    if (c.backend == backend) return c.name;
  }
  return "unknown";
}

}  // namespace kubetrain::exchange
