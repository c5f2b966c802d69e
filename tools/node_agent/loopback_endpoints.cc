#include "tools/node_agent/loopback_endpoints.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "api/env_vars.h"

namespace kubetrain::node_agent {
namespace {

constexpr char kLoopback[] = "127.0.0.1";

bool IsHostChar(char c) { return absl::ascii_isalnum(c) || c == '-' || c == '.'; }

std::optional<int> ParsePort(const std::string& s) {
  int port = 0;
  if (s.empty() || s.size() > 5 || !absl::SimpleAtoi(s, &port) || port < 1 || port > 65535) {
    return std::nullopt;
  }
  return port;
}

}  // namespace

absl::StatusOr<int> LoopbackEndpoints::PortFor(const std::string& ns, const std::string& name,
                                               int port) {
  const Key key{ns, name, port};
  auto it = allocated_.find(key);
  if (it != allocated_.end()) return it->second;
  absl::StatusOr<int> local = ports_.Allocate();
  if (!local.ok()) {
    return absl::Status(local.status().code(),
                        absl::StrCat("loopback port for ", name, ".", ns, ":", port, ": ",
                                     local.status().message()));
  }
  allocated_.emplace(key, *local);
  return *local;
}

std::optional<std::pair<std::string, std::string>> LoopbackEndpoints::ResolveHost(
    const std::string& host, const std::string& pod_namespace, const ServiceNames& services) {
  if (host.empty()) return std::nullopt;
  const std::vector<std::string> labels = absl::StrSplit(absl::AsciiStrToLower(host), '.');
  for (const std::string& label : labels) {
    if (label.empty()) return std::nullopt;
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] != "svc") continue;
    if (i == 2) return std::make_pair(labels[1], labels[0]);  // <svc>.<ns>.svc
    if (i == 3) return std::make_pair(labels[2], labels[0]);  // <host>.<sub>.<ns>.svc
    return std::nullopt;
  }
  if (labels.size() == 1 && services.count({pod_namespace, labels[0]})) {
    return std::make_pair(pod_namespace, labels[0]);
  }
  if (labels.size() == 2 && services.count({labels[1], labels[0]})) {
    return std::make_pair(labels[1], labels[0]);
  }
  return std::nullopt;
}

absl::StatusOr<std::string> LoopbackEndpoints::RewriteValue(const std::string& value,
                                                            const std::string& pod_namespace,
                                                            const ServiceNames& services) {
  // A value that is a bare Service host.
  if (ResolveHost(value, pod_namespace, services)) return std::string(kLoopback);
  std::string out;
  size_t i = 0;
  while (i < value.size()) {
    if (!IsHostChar(value[i]) || (i > 0 && IsHostChar(value[i - 1]))) {
      out += value[i++];
      continue;
    }
    // A maximal run of host characters, then ":" and a maximal run of digits
    // that no other host character follows.
    size_t j = i;
    while (j < value.size() && IsHostChar(value[j])) ++j;
    size_t k = j;
    if (k < value.size() && value[k] == ':') {
      ++k;
      while (k < value.size() && absl::ascii_isdigit(value[k])) ++k;
    }
    const bool has_port = k > j + 1 && (k == value.size() || !IsHostChar(value[k]));
    if (has_port) {
      const std::string host = value.substr(i, j - i);
      std::optional<int> port = ParsePort(value.substr(j + 1, k - j - 1));
      std::optional<std::pair<std::string, std::string>> service =
          ResolveHost(host, pod_namespace, services);
      if (port && service) {
        absl::StatusOr<int> local = PortFor(service->first, service->second, *port);
        if (!local.ok()) return local.status();
        absl::StrAppend(&out, kLoopback, ":", *local);
        i = k;
        continue;
      }
    }
    out.append(value, i, j - i);
    i = j;
  }
  return out;
}

absl::StatusOr<api::EnvList> LoopbackEndpoints::Rewrite(const std::string& pod_namespace,
                                                        const ServiceNames& services,
                                                        const api::EnvList& env) {
  api::EnvList out;
  out.reserve(env.size());
  // MASTER_ADDR and MASTER_PORT say one address in two variables: the last
  // definition of each wins, as in the process's environment.
  std::optional<std::pair<std::string, std::string>> master;
  std::optional<int> master_port;
  for (const auto& [name, value] : env) {
    if (name == api::kEnvMasterAddr) master = ResolveHost(value, pod_namespace, services);
    if (name == api::kEnvMasterPort) master_port = ParsePort(value);
  }
  std::optional<int> master_local;
  if (master && master_port) {
    absl::StatusOr<int> local = PortFor(master->first, master->second, *master_port);
    if (!local.ok()) return local.status();
    master_local = *local;
  }
  for (const auto& [name, value] : env) {
    if (name == api::kEnvMasterPort && master_local) {
      out.emplace_back(name, absl::StrCat(*master_local));
      continue;
    }
    absl::StatusOr<std::string> rewritten = RewriteValue(value, pod_namespace, services);
    if (!rewritten.ok()) return rewritten.status();
    out.emplace_back(name, std::move(*rewritten));
  }
  return out;
}

}  // namespace kubetrain::node_agent
