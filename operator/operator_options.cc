#include "operator/operator_options.h"

#include <arpa/inet.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "base/object_names.h"

namespace kubetrain::operator_main {
namespace {

constexpr char kVersion[] = "kubetrain-operator 0.1.0";
constexpr char kDurationHint[] = "examples: 15s, 500ms, 1m, 1h30m";
constexpr char kBindHint[] =
    "use host:port such as :8080 or 127.0.0.1:8080, :0 for any free port, "
    "or 0 to disable";

// Flags as CLI11 fills them: everything that needs checking is a string,
// checked after parsing so each error names its flag in our words.
struct RawFlags {
  std::string kubeconfig;
  std::string watch_namespace;
  bool leader_elect = true;
  std::string leader_election_namespace;
  std::string leader_election_id = kube::kDefaultLeaseName;
  std::string lease_duration = "15s";
  std::string renew_deadline = "10s";
  std::string retry_period = "2s";
  std::string metrics_bind_address = ":8080";
  std::string health_probe_bind_address = ":8081";
  std::string webhook_bind_address = ":9443";
  std::string webhook_cert_dir;
  std::string webhook_secret_name = "kubetrain-webhook-cert";
  std::string webhook_service_name = "kubetrain-webhook";
  std::string webhook_config_name = "kubetrain-validating-webhook";
  std::vector<std::string> webhook_hosts;
  std::string workers = "16";
  std::string action_threads = "16";
  std::string kube_api_qps = "20";
  std::string kube_api_burst = "30";
  std::string gang_scheduler;
  std::string progress_interval = "30s";
  std::string watch_nodes = "auto";
  std::string log_format = "text";
  std::string log_level = "info";
};

constexpr auto kTakeLast = CLI::MultiOptionPolicy::TakeLast;

// The app and the flags it fills; `raw` must outlive the app.
std::unique_ptr<CLI::App> MakeApp(RawFlags& raw) {
  auto app = std::make_unique<CLI::App>(
      "kubetrain-operator: runs TrainingJobs (kubetrain.io/v1alpha1) on Kubernetes: creates "
      "their Services and Pods, follows them and writes the jobs' status.",
      kProgramName);
  app->set_version_flag("--version", kVersion);
  app->get_formatter()->column_width(40);

  // Options whose value may be empty ("--namespace=" as a chart renders an
  // unset value) take 0 or 1 arguments.
  auto maybe_empty = [&](const std::string& name, std::string& into, const std::string& help) {
    return app->add_option(name, into, help)->expected(0, 1)->multi_option_policy(kTakeLast);
  };
  auto option = [&](const std::string& name, auto& into, const std::string& help) {
    return app->add_option(name, into, help)->multi_option_policy(kTakeLast);
  };

  maybe_empty("--kubeconfig", raw.kubeconfig,
              "Kubeconfig file (default: $KUBECONFIG, else the in-cluster service account when "
              "running in a pod, else ~/.kube/config)")
      ->type_name("PATH");
  maybe_empty("--namespace", raw.watch_namespace,
              "Watch TrainingJobs, Pods and Services only in this namespace (default: all "
              "namespaces)")
      ->type_name("NS");
  app->add_flag("--leader-elect", raw.leader_elect,
                "Elect one active replica through a coordination.k8s.io Lease; "
                "--leader-elect=false runs the controller at once")
      ->default_str("true")
      ->multi_option_policy(kTakeLast);
  maybe_empty("--leader-election-namespace", raw.leader_election_namespace,
              "Namespace of the leader election Lease (default: the service account's namespace, "
              "else the kubeconfig context's namespace, else default)")
      ->type_name("NS");
  option("--leader-election-id", raw.leader_election_id, "Name of the leader election Lease")
      ->type_name("NAME")
      ->default_str(raw.leader_election_id);
  option("--lease-duration", raw.lease_duration,
         "How long standbys wait after the leader's last renewal before taking over")
      ->type_name("DURATION")
      ->default_str(raw.lease_duration);
  option("--renew-deadline", raw.renew_deadline,
         "How long the leader keeps trying to renew before it steps down (and exits)")
      ->type_name("DURATION")
      ->default_str(raw.renew_deadline);
  option("--retry-period", raw.retry_period, "Time between leader election attempts")
      ->type_name("DURATION")
      ->default_str(raw.retry_period);
  option("--metrics-bind-address", raw.metrics_bind_address,
         "Serve Prometheus metrics at /metrics on this address (:0 = any free port, 0 = off)")
      ->type_name("ADDR")
      ->default_str(raw.metrics_bind_address);
  option("--health-probe-bind-address", raw.health_probe_bind_address,
         "Serve /healthz and /readyz on this address (:0 = any free port, 0 = off)")
      ->type_name("ADDR")
      ->default_str(raw.health_probe_bind_address);
  option("--webhook-bind-address", raw.webhook_bind_address,
         "Serve the validating admission webhook (HTTPS) on this IPv4 address; the API server "
         "then refuses a scale outside spec.elasticPolicy (:0 = any free port, 0 = off)")
      ->type_name("ADDR")
      ->default_str(raw.webhook_bind_address);
  maybe_empty("--webhook-cert-dir", raw.webhook_cert_dir,
              "Directory with the webhook's tls.crt and tls.key (cert-manager's); default: the "
              "operator makes its own, keeps it in --webhook-secret-name and sets the caBundle "
              "of --webhook-config-name")
      ->type_name("DIR");
  option("--webhook-secret-name", raw.webhook_secret_name,
         "Secret (in the leader-election namespace) holding the self-managed webhook "
         "certificate")
      ->type_name("NAME")
      ->default_str(raw.webhook_secret_name);
  option("--webhook-service-name", raw.webhook_service_name,
         "The webhook's Service; the certificate names <service>.<namespace>.svc")
      ->type_name("NAME")
      ->default_str(raw.webhook_service_name);
  option("--webhook-config-name", raw.webhook_config_name,
         "ValidatingWebhookConfiguration whose caBundle the operator sets to its own "
         "certificate (not with --webhook-cert-dir)")
      ->type_name("NAME")
      ->default_str(raw.webhook_config_name);
  app->add_option("--webhook-host", raw.webhook_hosts,
                  "Another name (DNS name or IP address) the webhook certificate carries, e.g. "
                  "127.0.0.1 for a configuration calling a url on loopback; repeatable")
      ->type_name("HOST");
  option("--workers", raw.workers, "Concurrent reconciles")
      ->type_name("N")
      ->default_str(raw.workers);
  option("--action-threads", raw.action_threads,
         "Threads that send the API requests reconciles decide on (creates, deletes, status "
         "writes); each waits on its requests' round trips")
      ->type_name("N")
      ->default_str(raw.action_threads);
  option("--kube-api-qps", raw.kube_api_qps,
         "Client-side rate limit of requests to the API server, per second, after the burst "
         "(0 = no limit)")
      ->type_name("QPS")
      ->default_str(raw.kube_api_qps);
  option("--kube-api-burst", raw.kube_api_burst,
         "Requests that may go at once before --kube-api-qps applies")
      ->type_name("N")
      ->default_str(raw.kube_api_burst);
  maybe_empty("--gang-scheduler", raw.gang_scheduler,
              "Gang scheduler for runPolicy.schedulingPolicy: \"\" (none, the default) or volcano "
              "(PodGroups)")
      ->type_name("NAME");
  option("--progress-interval", raw.progress_interval,
         "How often status.progress is refreshed from the chief's metrics (0 = off)")
      ->type_name("DURATION")
      ->default_str(raw.progress_interval);
  option("--watch-nodes", raw.watch_nodes,
         "Watch Nodes (list/watch) to recreate replicas whose node is lost "
         "(runPolicy.nodeLostTimeoutSeconds): true, false, or auto (true unless --namespace "
         "is set: a namespaced install has no cluster-scoped RBAC)")
      ->type_name("BOOL")
      ->default_str(raw.watch_nodes);
  option("--log-format", raw.log_format, "Log line format: text or json")
      ->type_name("FORMAT")
      ->default_str(raw.log_format);
  option("--log-level", raw.log_level, "Least severe level logged: debug, info, warning or error")
      ->type_name("LEVEL")
      ->default_str(raw.log_level);
  return app;
}

// CLI11 prefixes some messages with the program name; main adds its own.
std::string CliMessage(const CLI::Error& e) {
  absl::string_view message = e.what();
  absl::ConsumePrefix(&message, absl::StrCat(kProgramName, ": "));
  return std::string(message);
}

absl::Status Convert(const RawFlags& raw, OperatorOptions* o) {
  o->kubeconfig = raw.kubeconfig;
  o->watch_namespace = raw.watch_namespace;
  o->leader_elect = raw.leader_elect;
  o->leader_election_namespace = raw.leader_election_namespace;
  o->leader_election_id = raw.leader_election_id;

  // They become parts of request paths and object names: refuse what the
  // API would refuse, here, with the flag's name.
  if (!o->watch_namespace.empty() && !base::IsDns1123Label(o->watch_namespace)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--namespace: '", o->watch_namespace, "' is not a valid namespace name (DNS-1123 label)"));
  }
  if (!o->leader_election_namespace.empty() &&
      !base::IsDns1123Label(o->leader_election_namespace)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--leader-election-namespace: '", o->leader_election_namespace,
                     "' is not a valid namespace name (DNS-1123 label)"));
  }
  if (!o->leader_election_id.empty() && !base::IsDns1123Subdomain(o->leader_election_id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--leader-election-id: '", o->leader_election_id,
                     "' is not a valid Lease name (DNS-1123 subdomain)"));
  }

  struct DurationFlag {
    const char* flag;
    const std::string& text;
    absl::Duration* into;
  };
  for (const DurationFlag& d :
       {DurationFlag{"--lease-duration", raw.lease_duration, &o->lease_duration},
        DurationFlag{"--renew-deadline", raw.renew_deadline, &o->renew_deadline},
        DurationFlag{"--retry-period", raw.retry_period, &o->retry_period},
        DurationFlag{"--progress-interval", raw.progress_interval, &o->progress_interval}}) {
    absl::StatusOr<absl::Duration> parsed = ParseFlagDuration(d.text, d.flag);
    if (!parsed.ok()) return parsed.status();
    *d.into = *parsed;
  }

  absl::StatusOr<BindAddress> metrics =
      ParseBindAddress(raw.metrics_bind_address, "--metrics-bind-address");
  if (!metrics.ok()) return metrics.status();
  o->metrics_bind_address = *metrics;
  absl::StatusOr<BindAddress> health =
      ParseBindAddress(raw.health_probe_bind_address, "--health-probe-bind-address");
  if (!health.ok()) return health.status();
  o->health_probe_bind_address = *health;
  if (metrics->enabled && health->enabled && metrics->port != 0 && metrics->port == health->port &&
      metrics->host == health->host) {
    return absl::InvalidArgumentError(
        absl::StrCat("--health-probe-bind-address: ", health->ToString(),
                     " is also the --metrics-bind-address; give them different ports"));
  }

  absl::StatusOr<BindAddress> webhook =
      ParseBindAddress(raw.webhook_bind_address, "--webhook-bind-address");
  if (!webhook.ok()) return webhook.status();
  o->webhook_bind_address = *webhook;
  for (const BindAddress* other : {&*metrics, &*health}) {
    if (webhook->enabled && other->enabled && webhook->port != 0 && webhook->port == other->port &&
        webhook->host == other->host) {
      return absl::InvalidArgumentError(
          absl::StrCat("--webhook-bind-address: ", webhook->ToString(),
                       " is also the metrics or health probe address; give them different ports"));
    }
  }
  if (webhook->enabled && !webhook->host.empty() && webhook->host != "localhost") {
    unsigned char ip[4];
    if (inet_pton(AF_INET, webhook->host.c_str(), ip) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--webhook-bind-address: '", webhook->host, "' is not an IPv4 address"));
    }
  }
  o->webhook_cert_dir = raw.webhook_cert_dir;
  for (const auto& [flag, value] : {std::pair<const char*, const std::string&>{
                                        "--webhook-secret-name", raw.webhook_secret_name},
                                    {"--webhook-service-name", raw.webhook_service_name},
                                    {"--webhook-config-name", raw.webhook_config_name}}) {
    if (!value.empty() && !base::IsDns1123Subdomain(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": '", value, "' is not a valid object name (DNS-1123 subdomain)"));
    }
  }
  o->webhook_secret_name = raw.webhook_secret_name;
  o->webhook_service_name = raw.webhook_service_name;
  o->webhook_config_name = raw.webhook_config_name;
  o->webhook_hosts = raw.webhook_hosts;

  for (const auto& [flag, text, into] :
       {std::tuple<const char*, const std::string&, int*>{"--workers", raw.workers, &o->workers},
        {"--action-threads", raw.action_threads, &o->action_threads}}) {
    if (!absl::SimpleAtoi(text, into)) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": '", text, "' is not a whole number"));
    }
    if (*into < 1) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": must be at least 1, got ", text));
    }
  }

  if (!absl::SimpleAtod(raw.kube_api_qps, &o->throttle.qps)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kube-api-qps: '", raw.kube_api_qps, "' is not a number"));
  }
  if (!absl::SimpleAtoi(raw.kube_api_burst, &o->throttle.burst)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kube-api-burst: '", raw.kube_api_burst, "' is not a whole number"));
  }
  if (absl::Status s = kube::ValidateThrottleOptions(o->throttle); !s.ok()) return s;

  if (!raw.gang_scheduler.empty() && raw.gang_scheduler != "volcano") {
    return absl::InvalidArgumentError(absl::StrCat("--gang-scheduler: unknown gang scheduler '",
                                                   raw.gang_scheduler,
                                                   "' (supported: \"\" for none, volcano)"));
  }
  o->gang_scheduler = raw.gang_scheduler;

  if (raw.watch_nodes == "auto") {
    o->watch_nodes = o->watch_namespace.empty();
  } else if (raw.watch_nodes == "true") {
    o->watch_nodes = true;
  } else if (raw.watch_nodes == "false") {
    o->watch_nodes = false;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--watch-nodes: must be true, false or auto, got '", raw.watch_nodes, "'"));
  }
  if (raw.log_format == "text") {
    o->log_format = kube::StreamLogger::Format::kText;
  } else if (raw.log_format == "json") {
    o->log_format = kube::StreamLogger::Format::kJson;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--log-format: unknown format '", raw.log_format, "' (want text or json)"));
  }
  if (!kube::ParseLogLevel(raw.log_level, &o->log_level)) {
    return absl::InvalidArgumentError(absl::StrCat("--log-level: unknown level '", raw.log_level,
                                                   "' (want debug, info, warning or error)"));
  }

  if (o->leader_elect) {
    kube::LeaderElectionConfig check = ToLeaderElectionConfig(*o, "default", "check");
    absl::Status s = kube::ValidateLeaderElectionConfig(check);
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(s.message(), " (--lease-duration ", absl::FormatDuration(o->lease_duration),
                       ", --renew-deadline ", absl::FormatDuration(o->renew_deadline),
                       ", --retry-period ", absl::FormatDuration(o->retry_period), ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string BindAddress::CivetwebPorts() const {
  return host.empty() ? std::to_string(port) : absl::StrCat(host, ":", port);
}

std::string BindAddress::ToString() const { return enabled ? absl::StrCat(host, ":", port) : "0"; }

absl::StatusOr<BindAddress> ParseBindAddress(absl::string_view text, absl::string_view flag) {
  if (text == "0") return BindAddress{false, "", 0};
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": '", text, "' ", why, " (", kBindHint, ")"));
  };
  const size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos) return bad("is not host:port");
  absl::string_view host = text.substr(0, colon);
  absl::string_view port_text = text.substr(colon + 1);
  if (absl::StartsWith(host, "[") != absl::EndsWith(host, "]") || host == "[]") {
    return bad("has a malformed IPv6 host");
  }
  if (!absl::StartsWith(host, "[") && absl::StrContains(host, ':')) {
    return bad("has an IPv6 host without [brackets]");
  }
  int port = 0;
  if (port_text.empty() || !absl::SimpleAtoi(port_text, &port) || port < 0 || port > 65535 ||
      !absl::ascii_isdigit(static_cast<unsigned char>(port_text[0]))) {
    return bad("has no valid port (0-65535)");
  }
  return BindAddress{true, std::string(host), port};
}

absl::StatusOr<absl::Duration> ParseFlagDuration(absl::string_view text, absl::string_view flag) {
  absl::Duration d;
  // absl::ParseDuration takes Go's syntax; it also takes "inf", which a
  // period must not be.
  if (text.empty() || !absl::ParseDuration(text, &d) || d == absl::InfiniteDuration() ||
      d == -absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": '", text, "' is not a duration (", kDurationHint, ")"));
  }
  if (d < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": must not be negative, got ", text));
  }
  return d;
}

absl::StatusOr<CommandLine> ParseCommandLine(const std::vector<std::string>& args) {
  RawFlags raw;
  std::unique_ptr<CLI::App> app = MakeApp(raw);
  std::vector<const char*> argv;
  argv.reserve(args.size() + 1);
  if (args.empty()) argv.push_back(kProgramName);
  for (const std::string& a : args) argv.push_back(a.c_str());

  CommandLine result;
  try {
    app->parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp&) {
    result.action = CommandLine::Action::kPrintHelp;
    result.text = app->help();
    return result;
  } catch (const CLI::CallForAllHelp&) {
    result.action = CommandLine::Action::kPrintHelp;
    result.text = app->help();
    return result;
  } catch (const CLI::CallForVersion& e) {
    result.action = CommandLine::Action::kPrintVersion;
    result.text = absl::StrCat(e.what(), "\n");
    return result;
  } catch (const CLI::Error& e) {
    return absl::InvalidArgumentError(CliMessage(e));
  }
  absl::Status s = Convert(raw, &result.options);
  if (!s.ok()) return s;
  return result;
}

std::string HelpText() {
  RawFlags raw;
  return MakeApp(raw)->help();
}

std::string ResolveLeaderElectionNamespace(const OperatorOptions& options,
                                           const kube::KubeConfig& config,
                                           const kube::ConfigEnvironment& env,
                                           absl::string_view sa_dir) {
  if (!options.leader_election_namespace.empty()) return options.leader_election_namespace;
  absl::StatusOr<std::string> sa_namespace = env.ReadFile(absl::StrCat(sa_dir, "/namespace"));
  if (sa_namespace.ok()) {
    std::string ns(absl::StripAsciiWhitespace(*sa_namespace));
    if (!ns.empty()) return ns;
  }
  if (!config.default_namespace.empty()) return config.default_namespace;
  return "default";
}

std::string LeaderElectionIdentity(absl::string_view hostname, uint32_t random) {
  return absl::StrFormat("%s_%08x", hostname, random);
}

kube::LeaderElectionConfig ToLeaderElectionConfig(const OperatorOptions& options,
                                                  std::string lease_namespace,
                                                  std::string identity) {
  kube::LeaderElectionConfig c;
  c.lease_namespace = std::move(lease_namespace);
  c.lease_name = options.leader_election_id;
  c.identity = std::move(identity);
  c.lease_duration = options.lease_duration;
  c.renew_deadline = options.renew_deadline;
  c.retry_period = options.retry_period;
  c.release_on_stop = true;
  return c;
}

controller::ControllerOptions ToControllerOptions(const OperatorOptions& options) {
  controller::ControllerOptions c;
  c.watch_namespace = options.watch_namespace;
  c.workers = options.workers;
  c.action_threads = options.action_threads;
  c.gang_scheduler = options.gang_scheduler;
  c.progress_interval = options.progress_interval;
  c.watch_nodes = options.watch_nodes;
  return c;
}

}  // namespace kubetrain::operator_main
