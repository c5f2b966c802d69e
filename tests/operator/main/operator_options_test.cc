// The kubetrain-operator's flags: defaults, parsing, the form the Helm chart
// renders, and the message for every bad value.
#include "operator/operator_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kubetrain::operator_main {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<CommandLine> Parse(std::vector<std::string> flags) {
  flags.insert(flags.begin(), "kubetrain-operator");
  return ParseCommandLine(flags);
}

OperatorOptions ParseOk(std::vector<std::string> flags) {
  absl::StatusOr<CommandLine> cl = Parse(std::move(flags));
  EXPECT_TRUE(cl.ok()) << cl.status();
  if (!cl.ok()) return {};
  EXPECT_EQ(cl->action, CommandLine::Action::kRun);
  return cl->options;
}

// The message of a flag error (empty when parsing succeeded).
std::string ErrorOf(std::vector<std::string> flags) {
  absl::StatusOr<CommandLine> cl = Parse(std::move(flags));
  if (cl.ok()) return "";
  EXPECT_EQ(cl.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(cl.status().message());
}

TEST(OperatorOptionsTest, Defaults) {
  const OperatorOptions o = ParseOk({});
  EXPECT_EQ(o.kubeconfig, "");
  EXPECT_EQ(o.watch_namespace, "");
  EXPECT_TRUE(o.leader_elect);
  EXPECT_EQ(o.leader_election_namespace, "");
  EXPECT_EQ(o.leader_election_id, "kubetrain-operator");
  EXPECT_EQ(o.lease_duration, absl::Seconds(15));
  EXPECT_EQ(o.renew_deadline, absl::Seconds(10));
  EXPECT_EQ(o.retry_period, absl::Seconds(2));
  EXPECT_TRUE(o.metrics_bind_address.enabled);
  EXPECT_EQ(o.metrics_bind_address.host, "");
  EXPECT_EQ(o.metrics_bind_address.port, 8080);
  EXPECT_TRUE(o.health_probe_bind_address.enabled);
  EXPECT_EQ(o.health_probe_bind_address.port, 8081);
  EXPECT_EQ(o.workers, 16);
  EXPECT_EQ(o.action_threads, 16);
  EXPECT_EQ(o.throttle.qps, 20);  // controller-runtime's defaults
  EXPECT_EQ(o.throttle.burst, 30);
  EXPECT_EQ(o.gang_scheduler, "");
  EXPECT_EQ(o.progress_interval, absl::Seconds(30));
  EXPECT_EQ(o.log_format, kube::StreamLogger::Format::kText);
  EXPECT_EQ(o.log_level, kube::LogLevel::kInfo);
  EXPECT_TRUE(o.webhook_bind_address.enabled);
  EXPECT_EQ(o.webhook_bind_address.port, 9443);
  EXPECT_EQ(o.webhook_cert_dir, "");
  EXPECT_EQ(o.webhook_secret_name, "kubetrain-webhook-cert");
  EXPECT_EQ(o.webhook_service_name, "kubetrain-webhook");
  EXPECT_EQ(o.webhook_config_name, "kubetrain-validating-webhook");
  EXPECT_TRUE(o.webhook_hosts.empty());
}

TEST(OperatorOptionsTest, WebhookFlags) {
  const OperatorOptions o =
      ParseOk({"--webhook-bind-address=127.0.0.1:0", "--webhook-cert-dir=/certs",
               "--webhook-secret-name=s", "--webhook-service-name=svc", "--webhook-config-name=vwc",
               "--webhook-host", "127.0.0.1", "--webhook-host=op.example.com"});
  EXPECT_EQ(o.webhook_bind_address.host, "127.0.0.1");
  EXPECT_EQ(o.webhook_bind_address.port, 0);
  EXPECT_EQ(o.webhook_cert_dir, "/certs");
  EXPECT_EQ(o.webhook_secret_name, "s");
  EXPECT_EQ(o.webhook_service_name, "svc");
  EXPECT_EQ(o.webhook_config_name, "vwc");
  EXPECT_EQ(o.webhook_hosts, (std::vector<std::string>{"127.0.0.1", "op.example.com"}));
  EXPECT_FALSE(ParseOk({"--webhook-bind-address=0"}).webhook_bind_address.enabled);
  EXPECT_EQ(ErrorOf({"--webhook-bind-address=[::1]:9443"}),
            "--webhook-bind-address: '[::1]' is not an IPv4 address");
  EXPECT_EQ(ErrorOf({"--webhook-bind-address=:8080"}),
            "--webhook-bind-address: :8080 is also the metrics or health probe address; give "
            "them different ports");
  EXPECT_EQ(ErrorOf({"--webhook-secret-name=Not_A_Name"}),
            "--webhook-secret-name: 'Not_A_Name' is not a valid object name (DNS-1123 subdomain)");
}

TEST(OperatorOptionsTest, EveryFlag) {
  const OperatorOptions o = ParseOk({"--kubeconfig",
                                     "/tmp/kc",
                                     "--namespace",
                                     "team-a",
                                     "--leader-elect=false",
                                     "--leader-election-namespace",
                                     "ops",
                                     "--leader-election-id",
                                     "kt",
                                     "--lease-duration",
                                     "1m",
                                     "--renew-deadline",
                                     "45s",
                                     "--retry-period",
                                     "500ms",
                                     "--metrics-bind-address",
                                     "127.0.0.1:9090",
                                     "--health-probe-bind-address",
                                     ":0",
                                     "--workers",
                                     "8",
                                     "--kube-api-qps",
                                     "2.5",
                                     "--kube-api-burst",
                                     "5",
                                     "--gang-scheduler",
                                     "volcano",
                                     "--progress-interval",
                                     "0",
                                     "--log-format",
                                     "json",
                                     "--log-level",
                                     "debug"});
  EXPECT_EQ(o.kubeconfig, "/tmp/kc");
  EXPECT_EQ(o.watch_namespace, "team-a");
  EXPECT_FALSE(o.leader_elect);
  EXPECT_EQ(o.leader_election_namespace, "ops");
  EXPECT_EQ(o.leader_election_id, "kt");
  EXPECT_EQ(o.lease_duration, absl::Minutes(1));
  EXPECT_EQ(o.renew_deadline, absl::Seconds(45));
  EXPECT_EQ(o.retry_period, absl::Milliseconds(500));
  EXPECT_EQ(o.metrics_bind_address.host, "127.0.0.1");
  EXPECT_EQ(o.metrics_bind_address.port, 9090);
  EXPECT_EQ(o.metrics_bind_address.CivetwebPorts(), "127.0.0.1:9090");
  EXPECT_TRUE(o.health_probe_bind_address.enabled);
  EXPECT_EQ(o.health_probe_bind_address.port, 0);
  EXPECT_EQ(o.health_probe_bind_address.CivetwebPorts(), "0");
  EXPECT_EQ(o.workers, 8);
  EXPECT_EQ(o.throttle.qps, 2.5);
  EXPECT_EQ(o.throttle.burst, 5);
  EXPECT_EQ(o.gang_scheduler, "volcano");
  EXPECT_EQ(o.progress_interval, absl::ZeroDuration());
  EXPECT_EQ(o.log_format, kube::StreamLogger::Format::kJson);
  EXPECT_EQ(o.log_level, kube::LogLevel::kDebug);
}

// Exactly the arguments charts/kubetrain/templates/deployment.yaml renders
// with the chart's default values (and deploy/base/deployment.yaml).
TEST(OperatorOptionsTest, ChartArguments) {
  const OperatorOptions o =
      ParseOk({"--leader-elect=true", "--leader-election-id=kubetrain-operator",
               "--leader-election-namespace=kubetrain-system", "--lease-duration=15s",
               "--renew-deadline=10s", "--retry-period=2s", "--metrics-bind-address=:8080",
               "--health-probe-bind-address=:8081", "--workers=16", "--kube-api-qps=20",
               "--kube-api-burst=30", "--gang-scheduler=", "--progress-interval=30s",
               "--log-format=json", "--log-level=info"});
  EXPECT_TRUE(o.leader_elect);
  EXPECT_EQ(o.leader_election_namespace, "kubetrain-system");
  EXPECT_EQ(o.gang_scheduler, "");
  EXPECT_EQ(o.metrics_bind_address.CivetwebPorts(), "8080");
  EXPECT_EQ(o.health_probe_bind_address.CivetwebPorts(), "8081");
  EXPECT_EQ(o.log_format, kube::StreamLogger::Format::kJson);
}

TEST(OperatorOptionsTest, LeaderElectForms) {
  EXPECT_TRUE(ParseOk({"--leader-elect"}).leader_elect);
  EXPECT_TRUE(ParseOk({"--leader-elect=true"}).leader_elect);
  EXPECT_FALSE(ParseOk({"--leader-elect=false"}).leader_elect);
  // Lease timings are not checked when there is no election.
  EXPECT_FALSE(ParseOk({"--leader-elect=false", "--lease-duration=1s"}).leader_elect);
}

TEST(OperatorOptionsTest, WatchNodesAutoIsOffForANamespacedInstall) {
  EXPECT_TRUE(ParseOk({}).watch_nodes);
  EXPECT_FALSE(ParseOk({"--namespace=team-a"}).watch_nodes) << "no cluster-scoped RBAC there";
  EXPECT_TRUE(ParseOk({"--namespace=team-a", "--watch-nodes=true"}).watch_nodes);
  EXPECT_FALSE(ParseOk({"--watch-nodes=false"}).watch_nodes);
  EXPECT_TRUE(ParseOk({"--watch-nodes=auto"}).watch_nodes);
  EXPECT_TRUE(ToControllerOptions(ParseOk({})).watch_nodes);
  EXPECT_FALSE(ToControllerOptions(ParseOk({"--watch-nodes=false"})).watch_nodes);
}

TEST(OperatorOptionsTest, LastValueWins) {
  // The chart's extraArgs come after the rendered flags and override them.
  EXPECT_EQ(ParseOk({"--workers=16", "--workers=4"}).workers, 4);
  EXPECT_EQ(ParseOk({"--gang-scheduler=volcano", "--gang-scheduler="}).gang_scheduler, "");
  EXPECT_FALSE(ParseOk({"--leader-elect=true", "--leader-elect=false"}).leader_elect);
}

TEST(OperatorOptionsTest, EmptyValuesMeanDefault) {
  const OperatorOptions o =
      ParseOk({"--namespace=", "--kubeconfig=", "--leader-election-namespace="});
  EXPECT_EQ(o.watch_namespace, "");
  EXPECT_EQ(o.kubeconfig, "");
  EXPECT_EQ(o.leader_election_namespace, "");
}

TEST(OperatorOptionsTest, DisabledAndAnyPortAddresses) {
  const OperatorOptions o =
      ParseOk({"--metrics-bind-address=0", "--health-probe-bind-address=[::1]:8081"});
  EXPECT_FALSE(o.metrics_bind_address.enabled);
  EXPECT_EQ(o.metrics_bind_address.ToString(), "0");
  EXPECT_EQ(o.health_probe_bind_address.host, "[::1]");
  EXPECT_EQ(o.health_probe_bind_address.CivetwebPorts(), "[::1]:8081");
  // Both on port 0 is fine: each gets its own free port.
  EXPECT_TRUE(
      Parse({"--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0"})
          .ok());
}

TEST(OperatorOptionsTest, HelpListsEveryFlagWithItsDefault) {
  absl::StatusOr<CommandLine> cl = Parse({"--help"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->action, CommandLine::Action::kPrintHelp);
  EXPECT_EQ(cl->text, HelpText());
  const std::map<std::string, std::string> flags = {
      {"--kubeconfig", "in-cluster"},
      {"--namespace", "all namespaces"},
      {"--leader-elect", "=true"},
      {"--leader-election-namespace", "service account's namespace"},
      {"--leader-election-id", "=kubetrain-operator"},
      {"--lease-duration", "=15s"},
      {"--renew-deadline", "=10s"},
      {"--retry-period", "=2s"},
      {"--metrics-bind-address", "=:8080"},
      {"--health-probe-bind-address", "=:8081"},
      {"--workers", "=16"},
      {"--kube-api-qps", "=20"},
      {"--kube-api-burst", "=30"},
      {"--gang-scheduler", "the default"},
      {"--progress-interval", "=30s"},
      {"--watch-nodes", "=auto"},
      {"--log-format", "=text"},
      {"--log-level", "=info"},
  };
  for (const auto& [flag, default_text] : flags) {
    size_t at = cl->text.find(flag + " ");
    if (at == std::string::npos) at = cl->text.find(flag + "=");
    ASSERT_NE(at, std::string::npos) << flag << " missing from:\n" << cl->text;
    // The flag's entry runs to the next flag.
    const size_t next = cl->text.find("\n  --", at);
    const std::string entry = cl->text.substr(at, next - at);
    EXPECT_THAT(entry, HasSubstr(default_text)) << flag;
  }
}

TEST(OperatorOptionsTest, Version) {
  absl::StatusOr<CommandLine> cl = Parse({"--version"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->action, CommandLine::Action::kPrintVersion);
  EXPECT_THAT(cl->text, HasSubstr("kubetrain-operator "));
}

TEST(OperatorOptionsTest, BadValues) {
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--workers", "0"}, "--workers: must be at least 1, got 0"},
      {{"--workers=-2"}, "--workers: must be at least 1, got -2"},
      {{"--workers", "many"}, "--workers: 'many' is not a whole number"},
      {{"--action-threads", "0"}, "--action-threads: must be at least 1, got 0"},
      {{"--action-threads=lots"}, "--action-threads: 'lots' is not a whole number"},
      {{"--kube-api-qps", "fast"}, "--kube-api-qps: 'fast' is not a number"},
      {{"--kube-api-qps=-1"}, "--kube-api-qps: must be a number >= 0 (0: no limit), got -1"},
      {{"--kube-api-burst", "0"}, "--kube-api-burst: must be at least 1, got 0"},
      {{"--kube-api-burst", "lots"}, "--kube-api-burst: 'lots' is not a whole number"},
      {{"--gang-scheduler", "kube-batch"},
       "--gang-scheduler: unknown gang scheduler 'kube-batch' (supported: \"\" for none, "
       "volcano)"},
      {{"--lease-duration", "15"},
       "--lease-duration: '15' is not a duration (examples: 15s, 500ms, 1m, 1h30m)"},
      {{"--renew-deadline", "ten seconds"},
       "--renew-deadline: 'ten seconds' is not a duration (examples: 15s, 500ms, 1m, 1h30m)"},
      {{"--retry-period", "inf"},
       "--retry-period: 'inf' is not a duration (examples: 15s, 500ms, 1m, 1h30m)"},
      {{"--progress-interval", "-1s"}, "--progress-interval: must not be negative, got -1s"},
      {{"--lease-duration", "5s"},
       "--lease-duration: must be greater than --renew-deadline (--lease-duration 5s, "
       "--renew-deadline 10s, --retry-period 2s)"},
      {{"--retry-period", "10s"},
       "--renew-deadline: must be greater than --retry-period (--lease-duration 15s, "
       "--renew-deadline 10s, --retry-period 10s)"},
      {{"--retry-period", "0s"},
       "--retry-period: must be > 0 (--lease-duration 15s, --renew-deadline 10s, "
       "--retry-period 0)"},
      {{"--leader-election-id", ""}, "--leader-election-id: must not be empty"},
      {{"--leader-election-id", "my lease"},
       "--leader-election-id: 'my lease' is not a valid Lease name (DNS-1123 subdomain)"},
      {{"--namespace", "Team A"},
       "--namespace: 'Team A' is not a valid namespace name (DNS-1123 label)"},
      {{"--leader-election-namespace", "ops{1}"},
       "--leader-election-namespace: 'ops{1}' is not a valid namespace name (DNS-1123 label)"},
      {{"--log-format", "xml"}, "--log-format: unknown format 'xml' (want text or json)"},
      {{"--watch-nodes", "yes"}, "--watch-nodes: must be true, false or auto, got 'yes'"},
      {{"--log-level", "loud"},
       "--log-level: unknown level 'loud' (want debug, info, warning or error)"},
      {{"--metrics-bind-address", "8080"},
       "--metrics-bind-address: '8080' is not host:port (use host:port such as :8080 or "
       "127.0.0.1:8080, :0 for any free port, or 0 to disable)"},
      {{"--metrics-bind-address", ":http"},
       "--metrics-bind-address: ':http' has no valid port (0-65535)"},
      {{"--health-probe-bind-address", ":70000"},
       "--health-probe-bind-address: ':70000' has no valid port (0-65535)"},
      {{"--health-probe-bind-address", "::1:8081"},
       "--health-probe-bind-address: '::1:8081' has an IPv6 host without [brackets]"},
      {{"--health-probe-bind-address", "[::1:8081"},
       "--health-probe-bind-address: '[::1:8081' has a malformed IPv6 host"},
      {{"--health-probe-bind-address", ":8080"},
       "--health-probe-bind-address: :8080 is also the --metrics-bind-address; give them "
       "different ports"},
      {{"--no-such-flag"}, "The following argument was not expected: --no-such-flag"},
      {{"positional"}, "The following argument was not expected: positional"},
      {{"--leader-elect=maybe"}, "--leader-elect"},
      {{"--workers"}, "--workers"},
  };
  for (const Case& c : cases) {
    const std::string error = ErrorOf(c.flags);
    EXPECT_THAT(error, HasSubstr(c.message)) << ::testing::PrintToString(c.flags);
    EXPECT_EQ(error.find('\n'), std::string::npos) << "one line: " << error;
  }
}

class FakeEnvironment final : public kube::ConfigEnvironment {
 public:
  std::map<std::string, std::string> files;
  std::optional<std::string> GetEnv(absl::string_view) const override { return std::nullopt; }
  absl::StatusOr<std::string> ReadFile(absl::string_view path) const override {
    auto it = files.find(std::string(path));
    if (it == files.end()) return absl::NotFoundError(std::string(path));
    return it->second;
  }
  bool FileExists(absl::string_view path) const override {
    return files.count(std::string(path)) > 0;
  }
};

TEST(OperatorOptionsTest, LeaderElectionNamespace) {
  FakeEnvironment env;
  kube::KubeConfig config;
  config.default_namespace = "from-context";
  OperatorOptions o;
  // The kubeconfig context's namespace when there is no service account.
  EXPECT_EQ(ResolveLeaderElectionNamespace(o, config, env, "/sa"), "from-context");
  // The service account's namespace wins (trailing newline trimmed).
  env.files["/sa/namespace"] = "kubetrain-system\n";
  EXPECT_EQ(ResolveLeaderElectionNamespace(o, config, env, "/sa"), "kubetrain-system");
  // An empty file does not count.
  env.files["/sa/namespace"] = "  \n";
  EXPECT_EQ(ResolveLeaderElectionNamespace(o, config, env, "/sa"), "from-context");
  config.default_namespace = "";
  EXPECT_EQ(ResolveLeaderElectionNamespace(o, config, env, "/sa"), "default");
  // The flag wins over everything.
  env.files["/sa/namespace"] = "kubetrain-system";
  o.leader_election_namespace = "ops";
  EXPECT_EQ(ResolveLeaderElectionNamespace(o, config, env, "/sa"), "ops");
}

TEST(OperatorOptionsTest, IdentityIsHostnameAndEightHexDigits) {
  EXPECT_EQ(LeaderElectionIdentity("op-7d9f", 0xabc), "op-7d9f_00000abc");
  EXPECT_EQ(LeaderElectionIdentity("op", 0xdeadbeef), "op_deadbeef");
}

TEST(OperatorOptionsTest, ConversionsCarryTheFlags) {
  const OperatorOptions o =
      ParseOk({"--namespace=ns1", "--workers=3", "--action-threads=40", "--gang-scheduler=volcano",
               "--progress-interval=5s", "--leader-election-id=lease-x", "--lease-duration=3s",
               "--renew-deadline=2s", "--retry-period=1s"});
  const controller::ControllerOptions c = ToControllerOptions(o);
  EXPECT_EQ(c.watch_namespace, "ns1");
  EXPECT_EQ(c.workers, 3);
  EXPECT_EQ(c.action_threads, 40);
  EXPECT_EQ(c.gang_scheduler, "volcano");
  EXPECT_EQ(c.progress_interval, absl::Seconds(5));
  const kube::LeaderElectionConfig le = ToLeaderElectionConfig(o, "ops", "me_00000001");
  EXPECT_EQ(le.lease_namespace, "ops");
  EXPECT_EQ(le.lease_name, "lease-x");
  EXPECT_EQ(le.identity, "me_00000001");
  EXPECT_EQ(le.lease_duration, absl::Seconds(3));
  EXPECT_EQ(le.renew_deadline, absl::Seconds(2));
  EXPECT_EQ(le.retry_period, absl::Seconds(1));
  EXPECT_TRUE(le.release_on_stop);
  EXPECT_TRUE(kube::ValidateLeaderElectionConfig(le).ok());
}

}  // namespace
}  // namespace kubetrain::operator_main
