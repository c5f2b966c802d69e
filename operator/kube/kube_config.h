// Where the Kubernetes API is and how to authenticate to it: kubeconfig
// files (current or named context; token, tokenFile, client certificate,
// CA data or file, insecure-skip-tls-verify) and in-cluster service-account
// configuration, resolved in kubectl's order.
//
// File and environment access goes through ConfigEnvironment so tests can
// use a fake. Value types and free functions; thread-safe.
#ifndef KUBETRAIN_OPERATOR_KUBE_KUBE_CONFIG_H_
#define KUBETRAIN_OPERATOR_KUBE_KUBE_CONFIG_H_

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kubetrain::kube {

inline constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";

struct KubeConfig {
  std::string server;      // "https://10.0.0.1:443" (no trailing slash)
  std::string token;       // static bearer token ("" if none)
  std::string token_file;  // bearer token re-read from this file when it rotates
  std::string ca_pem;      // CA bundle, PEM ("" = system roots)
  std::string client_cert_pem;
  std::string client_key_pem;
  bool insecure_skip_tls_verify = false;
  std::string default_namespace = "default";
  std::string source;  // "in-cluster" or "kubeconfig <path> context <name>", for logs
};

class ConfigEnvironment {
 public:
  virtual ~ConfigEnvironment() = default;
  virtual std::optional<std::string> GetEnv(absl::string_view name) const = 0;
  virtual absl::StatusOr<std::string> ReadFile(absl::string_view path) const = 0;
  virtual bool FileExists(absl::string_view path) const = 0;
};

// The process environment and the real filesystem.
class RealConfigEnvironment final : public ConfigEnvironment {
 public:
  std::optional<std::string> GetEnv(absl::string_view name) const override;
  absl::StatusOr<std::string> ReadFile(absl::string_view path) const override;
  bool FileExists(absl::string_view path) const override;
};

// A kubeconfig's text. `context` empty = current-context. Relative file
// paths are resolved against `base_dir`. Errors name `source` and the
// missing or malformed field.
absl::StatusOr<KubeConfig> ParseKubeConfig(absl::string_view text, absl::string_view source,
                                           absl::string_view context, absl::string_view base_dir,
                                           const ConfigEnvironment& env);

absl::StatusOr<KubeConfig> LoadKubeConfigFile(absl::string_view path, absl::string_view context,
                                              const ConfigEnvironment& env);

// KUBERNETES_SERVICE_HOST/PORT plus the service account's token, ca.crt and
// namespace under `sa_dir`.
absl::StatusOr<KubeConfig> LoadInClusterConfig(const ConfigEnvironment& env,
                                               absl::string_view sa_dir = kServiceAccountDir);

// kubectl's order: an explicit path (--kubeconfig), else $KUBECONFIG (the
// first existing file of a colon-separated list), else in-cluster when
// KUBERNETES_SERVICE_HOST is set, else $HOME/.kube/config.
absl::StatusOr<KubeConfig> ResolveKubeConfig(absl::string_view explicit_path,
                                             absl::string_view context,
                                             const ConfigEnvironment& env);

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_OPERATOR_KUBE_KUBE_CONFIG_H_
