#include "api/cluster_spec.h"

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/env_vars.h"
#include "api/json_fields.h"

namespace kubetrain::api {
namespace {

// A JSON string as Go's encoding/json writes it: besides '"' and '\\' it
// escapes '<', '>', '&', U+2028 and U+2029, and control characters
// (\n, \r, \t by name, the rest as \u00xx).
void AppendGoJsonString(const std::string& s, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out->append("\\\"");
        continue;
      case '\\':
        out->append("\\\\");
        continue;
      case '\n':
        out->append("\\n");
        continue;
      case '\r':
        out->append("\\r");
        continue;
      case '\t':
        out->append("\\t");
        continue;
      default:
        break;
    }
    if (c < 0x20 || c == '<' || c == '>' || c == '&') {
      out->append("\\u00");
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 0xF]);
      continue;
    }
    // U+2028 / U+2029 are E2 80 A8 / E2 80 A9 in UTF-8.
    if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
        (static_cast<unsigned char>(s[i + 2]) == 0xA8 ||
         static_cast<unsigned char>(s[i + 2]) == 0xA9)) {
      out->append(static_cast<unsigned char>(s[i + 2]) == 0xA8 ? "\\u2028" : "\\u2029");
      i += 2;
      continue;
    }
    out->push_back(static_cast<char>(c));
  }
  out->push_back('"');
}

// Field errors of the TF_CONFIG toolkit's, named from the variable down.
absl::Status TfConfigError(const std::string& path, const std::string& problem) {
  return json_fields::FieldError(absl::StrCat("TF_CONFIG: ", path), problem);
}

// Splits "host:port" at the last ':'.
std::pair<std::string, std::string> SplitHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return {address, ""};
  return {address.substr(0, colon), address.substr(colon + 1)};
}

}  // namespace

std::optional<int> WorldRank(std::string_view lower_type, int index, int chiefs) {
  if (lower_type == "chief") return index;
  if (lower_type == "worker") return chiefs + index;
  return std::nullopt;
}

std::string ReplicaName(const TrainingJob& job, ReplicaType type, int index) {
  return absl::StrCat(job.metadata.name, "-", ReplicaTypeLower(type), "-", index);
}

bool IsChiefRole(const TrainingJob& job, ReplicaType type, int index) {
  if (job.ReplicaCount(ReplicaType::kChief) > 0) return type == ReplicaType::kChief;
  return type == ReplicaType::kWorker && index == 0;
}

std::map<std::string, std::string> ReplicaLabels(const TrainingJob& job, ReplicaType type,
                                                 int index) {
  std::map<std::string, std::string> labels = {
      {kLabelJobName, job.metadata.name},
      {kLabelReplicaType, ReplicaTypeLower(type)},
      {kLabelReplicaIndex, absl::StrCat(index)},
  };
  if (IsChiefRole(job, type, index)) labels[kLabelJobRole] = kJobRoleChief;
  return labels;
}

ClusterSpec ClusterFor(const TrainingJob& job, const AddressFn& address) {
  ClusterSpec cluster;
  for (const auto& [type, spec] : job.spec.replica_specs) {
    std::vector<std::string>& list = cluster.hosts[ReplicaTypeLower(type)];
    for (int i = 0; i < spec.Replicas(); ++i) list.push_back(address(type, i));
  }
  return cluster;
}

ClusterSpec InClusterSpec(const TrainingJob& job, const std::string& cluster_domain) {
  const std::string ns =
      job.metadata.namespace_name.empty() ? kDefaultNamespace : job.metadata.namespace_name;
  return ClusterFor(job, [&](ReplicaType type, int index) {
    // PerJob: the pod's hostname under the job's Service (its subdomain).
    std::string host =
        job.spec.service_mode == ServiceMode::kPerJob
            ? absl::StrCat(ReplicaName(job, type, index), ".", job.metadata.name, ".", ns, ".svc")
            : absl::StrCat(ReplicaName(job, type, index), ".", ns, ".svc");
    if (!cluster_domain.empty()) absl::StrAppend(&host, ".", cluster_domain);
    const ReplicaSpec* spec = job.Find(type);
    return absl::StrCat(host, ":", spec != nullptr ? spec->Port() : kDefaultPort);
  });
}

std::string TfConfigJson(const ClusterSpec& cluster, const std::string& task_type, int index) {
  std::string out = "{\"cluster\":{";
  bool first = true;
  for (const auto& [type, hosts] : cluster.hosts) {  // std::map: sorted keys, like Go
    if (!first) out.push_back(',');
    first = false;
    AppendGoJsonString(type, &out);
    out.append(":[");
    for (size_t i = 0; i < hosts.size(); ++i) {
      if (i > 0) out.push_back(',');
      AppendGoJsonString(hosts[i], &out);
    }
    out.push_back(']');
  }
  out.append("},\"task\":{\"type\":");
  AppendGoJsonString(task_type, &out);
  absl::StrAppend(&out, ",\"index\":", index, "},\"environment\":\"cloud\"}");
  return out;
}

std::string TfConfigJson(const ClusterSpec& cluster, ReplicaType type, int index) {
  return TfConfigJson(cluster, ReplicaTypeLower(type), index);
}

absl::StatusOr<TfConfig> ParseTfConfig(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG: not valid JSON: ", e.what()));
  }
  if (!j.is_object()) return TfConfigError("(root)", "must be a JSON object");
  TfConfig config;
  auto cluster = j.find("cluster");
  if (cluster == j.end() || !cluster->is_object()) {
    return TfConfigError("cluster", "must be an object of task type to address list");
  }
  for (const auto& [type, hosts] : cluster->items()) {
    const std::string path = absl::StrCat("cluster.", type);
    if (!hosts.is_array()) {
      return TfConfigError(path,
                           "must be a list of \"host:port\" (sparse cluster specs are not "
                           "supported)");
    }
    std::vector<std::string>& list = config.cluster.hosts[type];
    for (size_t i = 0; i < hosts.size(); ++i) {
      if (!hosts[i].is_string() || hosts[i].get<std::string>().empty()) {
        return TfConfigError(absl::StrCat(path, "[", i, "]"), "must be a \"host:port\" string");
      }
      list.push_back(hosts[i].get<std::string>());
    }
  }
  auto task = j.find("task");
  if (task == j.end() || !task->is_object()) {
    return TfConfigError("task", "must be an object {\"type\": ..., \"index\": ...}");
  }
  // Typed reads by the decoder's toolkit (json_fields.h); the bounds are TF_CONFIG's.
  const std::string task_path = "TF_CONFIG: task";
  if (absl::Status s = json_fields::GetString(*task, "type", task_path, &config.task_type);
      !s.ok()) {
    return s;
  }
  if (config.task_type.empty()) return TfConfigError("task.type", "must be a non-empty string");
  std::optional<int64_t> index;
  if (absl::Status s = json_fields::GetOptionalInt(*task, "index", task_path, &index); !s.ok()) {
    return s;
  }
  if (index.has_value()) {
    if (*index < 0 || *index > 1000000) {
      return TfConfigError("task.index",
                           absl::StrCat("must be a non-negative integer, got ", *index));
    }
    config.task_index = static_cast<int>(*index);
  }
  auto it = config.cluster.hosts.find(config.task_type);
  if (it == config.cluster.hosts.end()) {
    if (config.task_type != "evaluator") {
      std::vector<std::string> known;
      for (const auto& [k, v] : config.cluster.hosts) known.push_back(k);
      return TfConfigError("task.type",
                           absl::StrCat("\"", config.task_type, "\" is not in the cluster (has: ",
                                        absl::StrJoin(known, ", "), ")"));
    }
  } else if (static_cast<size_t>(config.task_index) >= it->second.size()) {
    return TfConfigError("task.index",
                         absl::StrCat(config.task_index, " is out of range: cluster.",
                                      config.task_type, " has ", it->second.size(), " entries"));
  }
  auto env = j.find("environment");
  if (env != j.end() && env->is_string()) config.environment = env->get<std::string>();
  return config;
}

EnvList ReplicaEnvironment(const TrainingJob& job, const ClusterSpec& cluster, ReplicaType type,
                           int index, const std::string& job_token) {
  EnvList env;
  env.emplace_back(kEnvTfConfig, TfConfigJson(cluster, type, index));
  auto hosts = [&](ReplicaType t) -> std::string {
    auto it = cluster.hosts.find(ReplicaTypeLower(t));
    return it == cluster.hosts.end() ? "" : absl::StrJoin(it->second, ",");
  };
  if (job.Find(ReplicaType::kPS)) env.emplace_back(kEnvPsHosts, hosts(ReplicaType::kPS));
  if (job.Find(ReplicaType::kWorker)) {
    env.emplace_back(kEnvWorkerHosts, hosts(ReplicaType::kWorker));
  }
  if (job.Find(ReplicaType::kChief)) {
    env.emplace_back(kEnvChiefHosts, hosts(ReplicaType::kChief));
  }
  env.emplace_back(kEnvJobName, job.metadata.name);
  env.emplace_back(kEnvNamespace, job.metadata.namespace_name.empty()
                                      ? std::string(kDefaultNamespace)
                                      : job.metadata.namespace_name);
  env.emplace_back(kEnvReplicaType, ReplicaTypeLower(type));
  env.emplace_back(kEnvReplicaIndex, absl::StrCat(index));
  if (job.ReplicaCount(ReplicaType::kPS) == 0) {
    const int chiefs = job.ReplicaCount(ReplicaType::kChief);
    const int workers = job.ReplicaCount(ReplicaType::kWorker);
    const std::string master_type = chiefs > 0 ? "chief" : "worker";
    auto it = cluster.hosts.find(master_type);
    if (it != cluster.hosts.end() && !it->second.empty()) {
      auto [host, port] = SplitHostPort(it->second[0]);
      env.emplace_back(kEnvMasterAddr, host);
      env.emplace_back(kEnvMasterPort, port);
    }
    env.emplace_back(kEnvWorldSize, absl::StrCat(chiefs + workers));
    if (std::optional<int> rank = WorldRank(ReplicaTypeLower(type), index, chiefs)) {
      env.emplace_back(kEnvRank, absl::StrCat(*rank));
    }
  }
  if (job.spec.elastic_policy && type == ReplicaType::kWorker) {
    env.emplace_back(kEnvMinWorkers, absl::StrCat(job.spec.elastic_policy->min_replicas));
    env.emplace_back(kEnvMaxWorkers, absl::StrCat(job.spec.elastic_policy->max_replicas));
  }
  if (!job_token.empty()) env.emplace_back(kEnvJobToken, job_token);
  return env;
}

std::string ExpandVars(
    const std::string& input,
    const std::function<std::optional<std::string>(const std::string&)>& lookup) {
  std::string out;
  size_t checkpoint = 0;
  for (size_t cursor = 0; cursor < input.size(); ++cursor) {
    if (input[cursor] != '$' || cursor + 1 >= input.size()) continue;
    out.append(input, checkpoint, cursor - checkpoint);
    const char next = input[cursor + 1];
    size_t advance = 1;
    if (next == '$') {
      out.push_back('$');  // escaped operator
    } else if (next == '(') {
      const size_t close = input.find(')', cursor + 2);
      if (close == std::string::npos) {
        out.append("$(");  // incomplete reference, kept
      } else {
        const std::string name = input.substr(cursor + 2, close - cursor - 2);
        std::optional<std::string> value = lookup(name);
        out.append(value ? *value : absl::StrCat("$(", name, ")"));
        advance = close - cursor;
      }
    } else {
      out.push_back('$');  // not an expression: "$" and the next byte as written
      out.push_back(next);
    }
    cursor += advance;
    checkpoint = cursor + 1;
  }
  out.append(input, checkpoint, std::string::npos);
  return out;
}

std::string ExpandVars(const std::string& s, const EnvList& env) {
  return ExpandVars(s, [&](const std::string& name) -> std::optional<std::string> {
    for (auto it = env.rbegin(); it != env.rend(); ++it) {
      if (it->first == name) return it->second;
    }
    return std::nullopt;
  });
}

}  // namespace kubetrain::api
