// Which gradient-exchange backend a training replica uses, decided here and
// nowhere else: candidates in order, the first that fits the cluster wins.
//   1. parameter servers: the cluster has PS replicas (sync, async, ssp);
//   2. allreduce: a cluster (TF_CONFIG) without PS replicas; inside it,
//      allreduce/collective_backend.h picks NCCL or the TCP ring;
//   3. local: no cluster at all, one process.
// A new backend (e.g. a hierarchical allreduce) is one more candidate in
// exchange_backend.cc. Stateless and thread-safe.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_EXCHANGE_BACKEND_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_EXCHANGE_BACKEND_H_

#include <span>
#include <string>

namespace kubetrain::exchange {

enum class ExchangeBackend { kParameterServer, kAllreduce, kLocal };

// What the choice depends on: the cluster as TF_CONFIG describes it.
struct ClusterShape {
  bool has_cluster = false;  // TF_CONFIG was given
  int ps_replicas = 0;
  int training_replicas = 0;  // chief + workers
};

struct ExchangeBackendCandidate {
  ExchangeBackend backend;
  const char* name;  // "ps", "allreduce", "local"
  bool (*fits)(const ClusterShape& shape);
};

// The candidates, in the order they are tried.
std::span<const ExchangeBackendCandidate> ExchangeBackendCandidates();

// The first candidate that fits `shape` (local always fits).
ExchangeBackend ChooseExchangeBackend(const ClusterShape& shape);

std::string ExchangeBackendName(ExchangeBackend backend);

}  // namespace kubetrain::exchange

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_EXCHANGE_BACKEND_H_
