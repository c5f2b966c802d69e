// ConstantLabels: the labels every series of a replica carries, from the
// environment the operator (or `kubetrain run`) gives it:
//   training_job       api::kEnvJobName
//   training_namespace api::kEnvNamespace
//   replica_type       api::kEnvReplicaType (lower-cased: ps, worker, chief, evaluator)
//   replica_index      api::kEnvReplicaIndex
// (not job/namespace: Prometheus owns those on every target, metric_names.h).
// Unset or empty variables give no label. Pure functions; thread-safe.
#ifndef KUBETRAIN_RUNTIME_METRICS_CONSTANT_LABELS_H_
#define KUBETRAIN_RUNTIME_METRICS_CONSTANT_LABELS_H_

#include <prometheus/labels.h>

#include <functional>
#include <optional>
#include <string>

namespace kubetrain::metrics {

// Looks up an environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment (getenv).
std::optional<std::string> ProcessEnv(const std::string& name);

// Labels from `env`. `fallback_type` / `fallback_index` (from TF_CONFIG) are
// used when api::kEnvReplicaType / kEnvReplicaIndex are unset; empty: no label.
prometheus::Labels ConstantLabelsFromEnv(const EnvLookup& env,
                                         const std::string& fallback_type = "",
                                         const std::string& fallback_index = "");

}  // namespace kubetrain::metrics

#endif  // KUBETRAIN_RUNTIME_METRICS_CONSTANT_LABELS_H_
