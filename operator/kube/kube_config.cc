#include "operator/kube/kube_config.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/yaml_json.h"
#include "operator/kube/object.h"

namespace kubetrain::kube {
namespace {

using Json = nlohmann::json;

std::string Resolve(absl::string_view path, absl::string_view base_dir) {
  if (path.empty() || path.front() == '/' || base_dir.empty()) return std::string(path);
  return absl::StrCat(base_dir, "/", path);
}

// The entry named `name` in a kubeconfig list ("clusters", "users",
// "contexts"): [{name: x, <field>: {...}}].
absl::StatusOr<Json> Named(const Json& root, absl::string_view list, absl::string_view field,
                           absl::string_view name, absl::string_view source) {
  if (!root.contains(list) || !root[std::string(list)].is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": no ", list, " list (looking for ", field, " \"", name, "\")"));
  }
  for (const Json& entry : root[std::string(list)]) {
    if (entry.is_object() && StringAt(entry, {"name"}) == name) {
      if (!entry.contains(field) || !entry[std::string(field)].is_object()) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ": ", list, "[name=", name, "] has no ", field, " object"));
      }
      return entry[std::string(field)];
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat(source, ": ", field, " \"", name, "\" not found in ", list));
}

std::string Str(const Json& obj, absl::string_view key) {
  auto it = obj.find(std::string(key));
  if (it == obj.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

absl::StatusOr<std::string> DataOrFile(const Json& obj, absl::string_view data_key,
                                       absl::string_view file_key, absl::string_view base_dir,
                                       absl::string_view where, const ConfigEnvironment& env) {
  std::string data = Str(obj, data_key);
  if (!data.empty()) {
    std::string decoded;
    if (!absl::Base64Unescape(data, &decoded)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".", data_key, ": not valid base64"));
    }
    return decoded;
  }
  std::string file = Str(obj, file_key);
  if (file.empty()) return std::string();
  absl::StatusOr<std::string> text = env.ReadFile(Resolve(file, base_dir));
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".", file_key, ": ", text.status().message()));
  }
  return text;
}

}  // namespace

std::optional<std::string> RealConfigEnvironment::GetEnv(absl::string_view name) const {
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

absl::StatusOr<std::string> RealConfigEnvironment::ReadFile(absl::string_view path) const {
  std::ifstream in{std::string(path), std::ios::binary};
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool RealConfigEnvironment::FileExists(absl::string_view path) const {
  struct stat st;
  return ::stat(std::string(path).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

absl::StatusOr<KubeConfig> ParseKubeConfig(absl::string_view text, absl::string_view source,
                                           absl::string_view context, absl::string_view base_dir,
                                           const ConfigEnvironment& env) {
  absl::StatusOr<Json> root = base::ParseYamlOrJson(std::string(text), std::string(source));
  if (!root.ok()) return root.status();
  if (!root->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": a kubeconfig must be a mapping"));
  }
  std::string context_name(context);
  if (context_name.empty()) context_name = Str(*root, "current-context");
  if (context_name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": no current-context and no --context given"));
  }
  absl::StatusOr<Json> ctx = Named(*root, "contexts", "context", context_name, source);
  if (!ctx.ok()) return ctx.status();
  std::string cluster_name = Str(*ctx, "cluster");
  std::string user_name = Str(*ctx, "user");
  if (cluster_name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": context \"", context_name, "\" names no cluster"));
  }
  absl::StatusOr<Json> cluster = Named(*root, "clusters", "cluster", cluster_name, source);
  if (!cluster.ok()) return cluster.status();

  KubeConfig config;
  config.source = absl::StrCat("kubeconfig ", source, " context ", context_name);
  config.server = Str(*cluster, "server");
  while (absl::EndsWith(config.server, "/")) config.server.pop_back();
  if (config.server.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": cluster \"", cluster_name, "\" has no server"));
  }
  if (!absl::StartsWith(config.server, "https://") && !absl::StartsWith(config.server, "http://")) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": cluster \"", cluster_name,
                                                   "\" server \"", config.server,
                                                   "\" is not an http(s) URL"));
  }
  if (cluster->contains("insecure-skip-tls-verify")) {
    const Json& v = (*cluster)["insecure-skip-tls-verify"];
    if (!v.is_boolean()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": clusters[", cluster_name,
                                                     "].insecure-skip-tls-verify: not a bool"));
    }
    config.insecure_skip_tls_verify = v.get<bool>();
  }
  absl::StatusOr<std::string> ca =
      DataOrFile(*cluster, "certificate-authority-data", "certificate-authority", base_dir,
                 absl::StrCat(source, ": clusters[", cluster_name, "]"), env);
  if (!ca.ok()) return ca.status();
  config.ca_pem = *std::move(ca);

  if (!user_name.empty()) {
    absl::StatusOr<Json> user = Named(*root, "users", "user", user_name, source);
    if (!user.ok()) return user.status();
    std::string where = absl::StrCat(source, ": users[", user_name, "]");
    config.token = Str(*user, "token");
    std::string token_file = Str(*user, "tokenFile");
    if (!token_file.empty()) config.token_file = Resolve(token_file, base_dir);
    absl::StatusOr<std::string> cert =
        DataOrFile(*user, "client-certificate-data", "client-certificate", base_dir, where, env);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key =
        DataOrFile(*user, "client-key-data", "client-key", base_dir, where, env);
    if (!key.ok()) return key.status();
    config.client_cert_pem = *std::move(cert);
    config.client_key_pem = *std::move(key);
    if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": a client certificate needs both certificate and key"));
    }
    if (user->contains("exec") || user->contains("auth-provider")) {
      if (config.token.empty() && config.token_file.empty() && config.client_cert_pem.empty()) {
        return absl::UnimplementedError(
            absl::StrCat(where,
                         ": exec and auth-provider credentials are not supported; use a token, "
                         "tokenFile or client certificate"));
      }
    }
  }
  std::string ns = Str(*ctx, "namespace");
  if (!ns.empty()) config.default_namespace = ns;
  return config;
}

absl::StatusOr<KubeConfig> LoadKubeConfigFile(absl::string_view path, absl::string_view context,
                                              const ConfigEnvironment& env) {
  absl::StatusOr<std::string> text = env.ReadFile(path);
  if (!text.ok()) {
    return absl::NotFoundError(absl::StrCat("kubeconfig ", path, ": ", text.status().message()));
  }
  absl::string_view dir = path;
  size_t slash = dir.rfind('/');
  dir = slash == absl::string_view::npos ? absl::string_view(".") : dir.substr(0, slash);
  return ParseKubeConfig(*text, path, context, dir, env);
}

absl::StatusOr<KubeConfig> LoadInClusterConfig(const ConfigEnvironment& env,
                                               absl::string_view sa_dir) {
  std::optional<std::string> host = env.GetEnv("KUBERNETES_SERVICE_HOST");
  std::optional<std::string> port = env.GetEnv("KUBERNETES_SERVICE_PORT");
  if (!host || host->empty() || !port || port->empty()) {
    return absl::FailedPreconditionError(
        "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be "
        "set");
  }
  KubeConfig config;
  config.source = "in-cluster";
  bool ipv6 = host->find(':') != std::string::npos;
  config.server = ipv6 ? absl::StrCat("https://[", *host, "]:", *port)
                       : absl::StrCat("https://", *host, ":", *port);
  config.token_file = absl::StrCat(sa_dir, "/token");
  absl::StatusOr<std::string> token = env.ReadFile(config.token_file);
  if (!token.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("in-cluster: service-account token: ", token.status().message()));
  }
  absl::StatusOr<std::string> ca = env.ReadFile(absl::StrCat(sa_dir, "/ca.crt"));
  if (!ca.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("in-cluster: service-account CA: ", ca.status().message()));
  }
  config.ca_pem = *std::move(ca);
  absl::StatusOr<std::string> ns = env.ReadFile(absl::StrCat(sa_dir, "/namespace"));
  if (ns.ok()) {
    std::string trimmed(absl::StripAsciiWhitespace(*ns));
    if (!trimmed.empty()) config.default_namespace = trimmed;
  }
  return config;
}

absl::StatusOr<KubeConfig> ResolveKubeConfig(absl::string_view explicit_path,
                                             absl::string_view context,
                                             const ConfigEnvironment& env) {
  if (!explicit_path.empty()) return LoadKubeConfigFile(explicit_path, context, env);
  if (std::optional<std::string> list = env.GetEnv("KUBECONFIG"); list && !list->empty()) {
    std::vector<std::string> paths = absl::StrSplit(*list, ':', absl::SkipEmpty());
    for (const std::string& path : paths) {
      if (env.FileExists(path)) return LoadKubeConfigFile(path, context, env);
    }
    return absl::NotFoundError(absl::StrCat("KUBECONFIG=", *list, ": no such file"));
  }
  if (std::optional<std::string> host = env.GetEnv("KUBERNETES_SERVICE_HOST");
      host && !host->empty()) {
    return LoadInClusterConfig(env);
  }
  if (std::optional<std::string> home = env.GetEnv("HOME"); home && !home->empty()) {
    std::string path = absl::StrCat(*home, "/.kube/config");
    if (env.FileExists(path)) return LoadKubeConfigFile(path, context, env);
  }
  return absl::NotFoundError(
      "no Kubernetes configuration: pass --kubeconfig, set KUBECONFIG, run in a cluster, or "
      "create ~/.kube/config");
}

}  // namespace kubetrain::kube
