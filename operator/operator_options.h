// OperatorOptions: the `kubetrain-operator` binary's configuration, parsed
// once from its command line (CLI11), with every default shown in --help.
// The flags are the ones the Helm chart and the kustomize manifests pass
// (charts/kubetrain/templates/deployment.yaml); their names and meanings
// follow controller-runtime's managers (--metrics-bind-address, --leader-elect,
// ...). A flag given twice takes its last value, as with Go's pflag, so
// `extraArgs` in the chart can override one.
//
// Value types and free functions; thread-safe.
#ifndef KUBETRAIN_OPERATOR_OPERATOR_OPTIONS_H_
#define KUBETRAIN_OPERATOR_OPERATOR_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "operator/controller/training_job_controller.h"
#include "operator/kube/kube_config.h"
#include "operator/kube/leader_elector.h"
#include "operator/kube/logger.h"
#include "operator/kube/throttled_transport.h"

namespace kubetrain::operator_main {

inline constexpr char kProgramName[] = "kubetrain-operator";

// A listen address: "host:port" (host "" = every interface), ":0" = any free
// port, "0" = disabled.
struct BindAddress {
  bool enabled = true;
  std::string host;  // "", "127.0.0.1", "0.0.0.0", "[::1]", "localhost"
  int port = 0;

  // The form civetweb's listening_ports takes: "8080", "127.0.0.1:0".
  std::string CivetwebPorts() const;
  // As given on the command line, for logs: ":8080", "127.0.0.1:0", "0".
  std::string ToString() const;
};

// "0" -> disabled; ":8080", "127.0.0.1:8080", "[::1]:8080", ":0". `flag`
// names the flag in errors.
absl::StatusOr<BindAddress> ParseBindAddress(absl::string_view text, absl::string_view flag);

// A Go-style duration: "15s", "500ms", "1m", "1h30m". Must be >= 0 and
// finite. `flag` names the flag in errors.
absl::StatusOr<absl::Duration> ParseFlagDuration(absl::string_view text, absl::string_view flag);

struct OperatorOptions {
  // "" = $KUBECONFIG, else in-cluster, else ~/.kube/config (kube::ResolveKubeConfig,
  // kubectl's and controller-runtime's order).
  std::string kubeconfig;
  std::string watch_namespace;  // "" = every namespace
  bool leader_elect = true;
  // "" = the service account's namespace, else the kubeconfig context's
  // namespace, else "default" (ResolveLeaderElectionNamespace).
  std::string leader_election_namespace;
  std::string leader_election_id = kube::kDefaultLeaseName;
  absl::Duration lease_duration = absl::Seconds(15);
  absl::Duration renew_deadline = absl::Seconds(10);
  absl::Duration retry_period = absl::Seconds(2);
  BindAddress metrics_bind_address{true, "", 8080};
  BindAddress health_probe_bind_address{true, "", 8081};
  // The validating admission webhook (operator/webhook/): where it listens,
  // and where its certificate comes from: files in webhook_cert_dir, else the
  // Secret webhook_secret_name in the leader-election namespace, made by the
  // operator for webhook_service_name's DNS names and webhook_hosts, its CA
  // set as the caBundle of webhook_config_name.
  BindAddress webhook_bind_address{true, "", 9443};
  std::string webhook_cert_dir;
  std::string webhook_secret_name = "kubetrain-webhook-cert";
  std::string webhook_service_name = "kubetrain-webhook";
  std::string webhook_config_name = "kubetrain-validating-webhook";
  std::vector<std::string> webhook_hosts;
  int workers = 16;
  // Threads that send the requests reconcile passes decide on (ActionRunner).
  int action_threads = 16;
  // The API client's rate limit (kube::ThrottledTransport); qps 0: none.
  kube::ThrottleOptions throttle;
  std::string gang_scheduler;                            // "" or "volcano"
  absl::Duration progress_interval = absl::Seconds(30);  // 0 = off
  // Nodes watched for lost replicas (--watch-nodes; auto: unless
  // --namespace is set).
  bool watch_nodes = true;
  kube::StreamLogger::Format log_format = kube::StreamLogger::Format::kText;
  kube::LogLevel log_level = kube::LogLevel::kInfo;
};

// What the command line asks for.
struct CommandLine {
  enum class Action { kRun, kPrintHelp, kPrintVersion };
  Action action = Action::kRun;
  OperatorOptions options;  // for kRun
  std::string text;         // for kPrintHelp / kPrintVersion: what to print
};

// Parses `args` (args[0] is the program name). Errors are InvalidArgument
// with a one-line message naming the flag and the bad value (the caller
// prints "kubetrain-operator: error: <message>" and exits 2).
absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args);

// The --help text.
std::string HelpText();

// The namespace of the leader election Lease: the flag when given, else the
// service account's namespace file under `sa_dir` when readable and not
// empty, else the kubeconfig's context namespace, else "default".
std::string ResolveLeaderElectionNamespace(const OperatorOptions& options,
                                           const kube::KubeConfig& config,
                                           const kube::ConfigEnvironment& env,
                                           absl::string_view sa_dir = kube::kServiceAccountDir);

// "<hostname>_<8 hex digits of random>" (client-go's "<hostname>_<uuid>", shorter).
std::string LeaderElectionIdentity(absl::string_view hostname, uint32_t random);

kube::LeaderElectionConfig ToLeaderElectionConfig(const OperatorOptions& options,
                                                  std::string lease_namespace,
                                                  std::string identity);
controller::ControllerOptions ToControllerOptions(const OperatorOptions& options);

}  // namespace kubetrain::operator_main

#endif  // KUBETRAIN_OPERATOR_OPERATOR_OPTIONS_H_
