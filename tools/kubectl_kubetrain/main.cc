// kubectl-kubetrain: the kubectl plugin for TrainingJobs (`kubectl kubetrain
// logs|top|describe JOB`; docs/kubectl-plugin.md). Wires the flags, the
// kubeconfig, the API client and SIGINT/SIGTERM to the commands.
#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/stop_signals.h"
#include "operator/kube/cpprest_transport.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/kube_config.h"
#include "tools/kubectl_kubetrain/describe_command.h"
#include "tools/kubectl_kubetrain/kube_cluster_reader.h"
#include "tools/kubectl_kubetrain/line_writer.h"
#include "tools/kubectl_kubetrain/log_follower.h"
#include "tools/kubectl_kubetrain/logs_command.h"
#include "tools/kubectl_kubetrain/top_command.h"

namespace kubetrain::kubectl_plugin {
namespace {

int Fail(const absl::Status& status) {
  std::cerr << "kubectl-kubetrain: error: " << status.message() << "\n";
  return 1;
}

struct Common {
  std::string kubeconfig;
  std::string context;
  std::string ns;
};

}  // namespace

int Main(int argc, char** argv) {
  // Before any thread: SIGINT and SIGTERM are taken by a StopSignalThread.
  base::StopSignals::Block();
  CLI::App app{"kubectl kubetrain: logs, top and describe for kubetrain TrainingJobs",
               "kubectl-kubetrain"};
  app.require_subcommand(1);
  Common common;
  app.add_option("--kubeconfig", common.kubeconfig,
                 "kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)");
  app.add_option("--context", common.context, "kubeconfig context (default: current)");
  app.add_option("-n,--namespace", common.ns, "namespace (default: the context's)");

  std::string job;
  LogsOptions logs;
  std::string replica;
  bool follow = false;
  CLI::App* logs_cmd =
      app.add_subcommand("logs", "every replica's log, lines prefixed [worker-3 r2]");
  logs_cmd->add_option("JOB", job, "TrainingJob name")->required();
  logs_cmd->add_flag("-f,--follow", follow,
                     "follow across container restarts and pod re-creation until the job ends");
  logs_cmd->add_flag("-p,--previous", logs.previous, "the previous instance of each container");
  logs_cmd->add_option("--replica", replica, "one replica only, e.g. worker-3");
  logs_cmd->add_option("-c,--container", logs.container, "container (default: the first)");

  bool watch = false;
  double interval_seconds = 2;
  CLI::App* top_cmd =
      app.add_subcommand("top", "step, samples/s, exchange share, stalls per replica");
  top_cmd->add_option("JOB", job, "TrainingJob name")->required();
  top_cmd->add_flag("-w,--watch", watch, "refresh until the job ends or Ctrl-C");
  top_cmd->add_option("--interval", interval_seconds, "seconds between refreshes with --watch")
      ->check(CLI::PositiveNumber);

  CLI::App* describe_cmd =
      app.add_subcommand("describe", "phase, conditions, failure, replicas, events");
  describe_cmd->add_option("JOB", job, "TrainingJob name")->required();

  // CLI11 options are read again for the subcommands: `kubectl kubetrain logs -n ns x` works.
  for (CLI::App* sub : {logs_cmd, top_cmd, describe_cmd}) {
    sub->add_option("--kubeconfig", common.kubeconfig, "kubeconfig file");
    sub->add_option("--context", common.context, "kubeconfig context");
    sub->add_option("-n,--namespace", common.ns, "namespace");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (follow && logs.previous) {
    std::cerr << "kubectl-kubetrain: error: --follow and --previous cannot go together\n";
    return 2;
  }
  if (!replica.empty()) {
    absl::StatusOr<ReplicaRef> ref = ParseReplicaName(replica);
    if (!ref.ok()) {
      std::cerr << "kubectl-kubetrain: error: --replica: " << ref.status().message() << "\n";
      return 2;
    }
    logs.only = *ref;
  }

  kube::RealConfigEnvironment env;
  RealClock clock;
  absl::StatusOr<kube::KubeConfig> config =
      kube::ResolveKubeConfig(common.kubeconfig, common.context, env);
  if (!config.ok()) return Fail(config.status());
  const std::string ns = common.ns.empty() ? config->default_namespace : common.ns;
  kube::TransportOptions transport_options;
  transport_options.user_agent = "kubectl-kubetrain/0.1";
  absl::StatusOr<std::unique_ptr<kube::CpprestTransport>> transport =
      kube::CpprestTransport::Create(*config, transport_options, env, clock);
  if (!transport.ok()) return Fail(transport.status());
  kube::KubeClient client(*std::move(transport));
  // Metrics pages go through the pod proxy: a replica that does not answer
  // costs one short try, not the client's retries.
  transport_options.request_timeout = absl::Seconds(5);
  absl::StatusOr<std::unique_ptr<kube::CpprestTransport>> metrics_transport =
      kube::CpprestTransport::Create(*config, transport_options, env, clock);
  if (!metrics_transport.ok()) return Fail(metrics_transport.status());
  kube::RetryPolicy once;
  once.max_attempts = 1;
  kube::KubeClient metrics_client(*std::move(metrics_transport), once);
  KubeClusterReader api(client, metrics_client);

  if (logs_cmd->parsed()) {
    logs.ns = ns;
    logs.job = job;
    if (!follow) {
      absl::Status status = PrintLogs(api, logs, std::cout, std::cerr);
      return status.ok() ? 0 : Fail(status);
    }
    LineWriter out(std::cout);
    FollowOptions options;
    options.ns = ns;
    options.job = job;
    options.container = logs.container;
    options.only = logs.only;
    LogFollower follower(api, out, std::cerr, options);
    base::StopSignalThread signals([&follower](int, int) { follower.Stop(); });
    absl::Status status = follower.Run();
    return status.ok() ? 0 : Fail(status);
  }
  if (top_cmd->parsed()) {
    absl::Notification stop;
    base::StopSignalThread signals([&stop](int, int) {
      if (!stop.HasBeenNotified()) stop.Notify();
    });
    std::map<std::string, ReplicaMetrics> previous;
    while (true) {
      absl::StatusOr<TopSnapshot> snapshot = CollectTop(api, ns, job, &previous);
      if (!snapshot.ok()) return Fail(snapshot.status());
      if (watch) std::cout << "\033[H\033[2J";  // clear the screen, as watch(1)
      std::cout << "trainingjob " << job << " (" << snapshot->phase << ")\n"
                << RenderTopTable(snapshot->rows);
      std::cout.flush();
      if (!watch || snapshot->finished) return 0;
      if (stop.WaitForNotificationWithTimeout(absl::Seconds(interval_seconds))) return 0;
    }
  }
  absl::StatusOr<std::string> screen = DescribeJob(api, ns, job, absl::ToUnixMicros(absl::Now()));
  if (!screen.ok()) return Fail(screen.status());
  std::cout << *screen;
  return 0;
}

}  // namespace kubetrain::kubectl_plugin

int main(int argc, char** argv) { return kubetrain::kubectl_plugin::Main(argc, argv); }
