#include "runtime/metrics/constant_labels.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "api/env_vars.h"
#include "runtime/metrics/metric_names.h"

namespace kubetrain::metrics {

std::optional<std::string> ProcessEnv(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

prometheus::Labels ConstantLabelsFromEnv(const EnvLookup& env, const std::string& fallback_type,
                                         const std::string& fallback_index) {
  prometheus::Labels labels;
  auto add = [&](const char* label, const char* var, const std::string& fallback) {
    std::optional<std::string> v = env(var);
    std::string value = v.has_value() && !v->empty() ? *v : fallback;
    if (!value.empty()) labels[label] = std::move(value);
  };
  add(kLabelJob, api::kEnvJobName, "");
  add(kLabelNamespace, api::kEnvNamespace, "");
  add(kLabelReplicaType, api::kEnvReplicaType, fallback_type);
  add(kLabelReplicaIndex, api::kEnvReplicaIndex, fallback_index);
  if (auto it = labels.find(kLabelReplicaType); it != labels.end()) {
    it->second = absl::AsciiStrToLower(it->second);  // "Worker" in the spec, "worker" here
  }
  return labels;
}

}  // namespace kubetrain::metrics
