// kubetrain-node-agent: the kubelet's part on one machine, for tests and
// local demos (docs/e2e.md). Registers a Node, binds and runs pods as
// process groups in network namespaces (or, without permission for them, on
// the host's network with a loopback port per Service port), reports their
// status; SIGTERM or SIGINT stops every pod and removes the namespaces.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/clock.h"
#include "base/stop_signals.h"
#include "operator/kube/cpprest_transport.h"
#include "operator/kube/https_server.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/kube_config.h"
#include "operator/kube/logger.h"
#include "tools/node_agent/command_runner.h"
#include "tools/node_agent/kubelet_endpoints.h"
#include "tools/node_agent/loopback_network.h"
#include "tools/node_agent/netns_network.h"
#include "tools/node_agent/network_mode.h"
#include "tools/node_agent/node_agent.h"
#include "tools/node_agent/node_api.h"
#include "tools/node_agent/node_monitor.h"
#include "tools/node_agent/port_allocator.h"
#include "tools/node_agent/process_launcher.h"
#include "tools/node_agent/quantity.h"

namespace {

namespace na = kubetrain::node_agent;
namespace kube = kubetrain::kube;
constexpr char kLog[] = "node-agent";

struct Options {
  std::string kubeconfig;
  std::string node_name = "kubetrain-node";
  std::string cpu = "8";
  std::string memory = "16Gi";
  int64_t pods = 110;
  std::string state_dir = "/tmp/kubetrain-node-agent";
  std::string entrypoint;
  std::string bridge = "kt0";
  std::string subnet = "10.244.0";
  std::string network = "auto";
  double sync_seconds = 0.25;
  double node_lease_seconds = 40;
  double node_monitor_grace_seconds = 0;
  std::string netns_prefix = "kt";
  std::string pod_addresses = "2-254";
  double shutdown_grace_seconds = 10;
  std::string host_ip = "127.0.0.1";
  int kubelet_port = 0;
  std::string tls_cert_file;
  std::string tls_key_file;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "kubetrain-node-agent: plays the kubelet (and a minimal scheduler) on this machine for "
      "tests and local demos. Pods run as process groups, each in its own network namespace "
      "on a bridge (root); without permission for network namespaces, on the host's network "
      "with a loopback port per Service port."};
  app.add_option("--kubeconfig", o.kubeconfig, "kubeconfig ('' = $KUBECONFIG, ~/.kube/config)");
  app.add_option("--node-name", o.node_name, "the Node to register")->capture_default_str();
  app.add_option("--cpu", o.cpu, "CPU capacity (quantity)")->capture_default_str();
  app.add_option("--memory", o.memory, "memory capacity (quantity)")->capture_default_str();
  app.add_option("--pods", o.pods, "pod capacity")->capture_default_str();
  app.add_option("--state-dir", o.state_dir, "logs/, pods/ (per-pod state files), work/")
      ->capture_default_str();
  app.add_option("--entrypoint", o.entrypoint,
                 "what a container without `command` runs (the image's entrypoint), e.g. the "
                 "kubetrain binary")
      ->required();
  app.add_option("--bridge", o.bridge, "bridge joining the pods' veths")->capture_default_str();
  app.add_option("--subnet", o.subnet, "first three octets of the pods' /24")
      ->capture_default_str();
  app.add_option("--network", o.network,
                 "pod network: netns (a namespace per pod on the bridge; needs root), loopback "
                 "(the host's network, podIP 127.0.0.1, a loopback port per Service port, peers' "
                 "addresses rewritten in each container's environment) or auto (netns when "
                 "permitted, else loopback)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "netns", "loopback"}));
  app.add_option("--sync-interval", o.sync_seconds, "seconds between passes")
      ->capture_default_str();
  app.add_option("--node-lease-duration", o.node_lease_seconds,
                 "the node's Lease duration in seconds (kube-node-lease), renewed every quarter "
                 "of it: the heartbeat the node lifecycle controller reads")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3600.0));
  app.add_option("--node-monitor-grace-period", o.node_monitor_grace_seconds,
                 "seconds without a Lease renewal after which this agent marks another agent's "
                 "Node Ready=Unknown, as kube-controller-manager's node lifecycle controller "
                 "does (0: off, leave it to the control plane)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--netns-prefix", o.netns_prefix,
                 "names of this agent's network namespaces and links start with this (at most 4 "
                 "characters; distinct for each agent on one machine)")
      ->capture_default_str();
  app.add_option("--pod-addresses", o.pod_addresses,
                 "last octets this agent gives its pods in the /24, LO-HI (agents sharing a "
                 "bridge and subnet take disjoint ranges)")
      ->capture_default_str();
  app.add_option("--shutdown-grace", o.shutdown_grace_seconds,
                 "seconds between SIGTERM and SIGKILL for the pods on shutdown")
      ->capture_default_str();
  app.add_option("--host-ip", o.host_ip,
                 "this node's address (the Node's InternalIP, pods' status.hostIP) and where the "
                 "kubelet endpoint listens")
      ->capture_default_str();
  app.add_option("--kubelet-port", o.kubelet_port,
                 "HTTPS port of the kubelet endpoint kube-apiserver proxies pods/log to "
                 "(/containerLogs), published as the Node's daemonEndpoints; 0: off")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--tls-cert-file", o.tls_cert_file,
                 "PEM certificate of the kubelet endpoint (a self-signed one does: kube-apiserver "
                 "does not verify it without --kubelet-certificate-authority)");
  app.add_option("--tls-private-key-file", o.tls_key_file, "PEM private key of that certificate");
  CLI11_PARSE(app, argc, argv);
  if (o.kubelet_port != 0 && (o.tls_cert_file.empty() || o.tls_key_file.empty())) {
    std::cerr << "kubetrain-node-agent: --kubelet-port needs --tls-cert-file and "
                 "--tls-private-key-file\n";
    return 2;
  }

  kube::StreamLogger logger(std::cerr, kube::StreamLogger::Format::kText, kube::LogLevel::kInfo);
  na::NodeAgentOptions options;
  options.node_name = o.node_name;
  options.entrypoint = o.entrypoint;
  options.state_dir = o.state_dir;
  options.host_ip = o.host_ip;
  options.kubelet_port = o.kubelet_port;
  absl::StatusOr<int64_t> cpu = na::ParseCpuMillis(o.cpu);
  absl::StatusOr<int64_t> memory = na::ParseBytes(o.memory);
  if (!cpu.ok() || !memory.ok() || o.pods <= 0) {
    std::cerr << "kubetrain-node-agent: bad capacity: "
              << (!cpu.ok()      ? cpu.status().message()
                  : !memory.ok() ? memory.status().message()
                                 : "--pods must be > 0")
              << "\n";
    return 2;
  }
  options.capacity = {*cpu, *memory, o.pods};
  options.node_lease_duration = absl::Seconds(o.node_lease_seconds);
  int first_octet = 0, last_octet = 0;
  {
    std::pair<std::string, std::string> range = absl::StrSplit(o.pod_addresses, '-');
    if (!absl::SimpleAtoi(range.first, &first_octet) ||
        !absl::SimpleAtoi(range.second, &last_octet) || first_octet < 2 || last_octet > 254 ||
        first_octet > last_octet) {
      std::cerr << "kubetrain-node-agent: --pod-addresses: want LO-HI within 2-254, got '"
                << o.pod_addresses << "'\n";
      return 2;
    }
  }
  if (o.netns_prefix.empty() || o.netns_prefix.size() > 4) {
    std::cerr << "kubetrain-node-agent: --netns-prefix: 1 to 4 characters, got '" << o.netns_prefix
              << "'\n";
    return 2;
  }

  // Signals go to StopSignals::Wait below, which is also the loop's sleep.
  kubetrain::base::StopSignals::Block();

  kube::RealConfigEnvironment env;
  kubetrain::RealClock clock;
  absl::StatusOr<kube::KubeConfig> config = kube::ResolveKubeConfig(o.kubeconfig, "", env);
  if (!config.ok()) {
    logger.Error(kLog, absl::StrCat("kubeconfig: ", config.status().message()));
    return 1;
  }
  kube::TransportOptions transport_options;
  transport_options.user_agent = "kubetrain-node-agent/0.1";
  absl::StatusOr<std::unique_ptr<kube::CpprestTransport>> transport =
      kube::CpprestTransport::Create(*config, transport_options, env, clock);
  if (!transport.ok()) {
    logger.Error(kLog,
                 absl::StrCat("kubeconfig ", config->source, ": ", transport.status().message()));
    return 1;
  }
  kube::KubeClient client(std::move(*transport));
  na::KubeNodeApi api(client);
  absl::StatusOr<na::NetworkMode> mode = na::ParseNetworkMode(o.network);
  if (!mode.ok()) {
    logger.Error(kLog, std::string(mode.status().message()));
    return 2;
  }
  const na::NetworkChoice choice = na::ChooseNetwork(
      *mode, *mode == na::NetworkMode::kAuto ? na::ProbeNetworkNamespaces() : absl::OkStatus());
  if (!choice.notice.empty()) logger.Warning(kLog, choice.notice);
  na::RealCommandRunner runner;
  na::LoopbackPortAllocator ports;
  std::unique_ptr<na::PodNetwork> network;
  if (choice.loopback) {
    network = std::make_unique<na::LoopbackNetwork>(ports);
  } else {
    na::NetnsOptions net_options;
    net_options.bridge = o.bridge;
    net_options.subnet_prefix = o.subnet;
    net_options.name_prefix = o.netns_prefix;
    net_options.first_octet = first_octet;
    net_options.last_octet = last_octet;
    network = std::make_unique<na::NetnsNetwork>(runner, net_options);
  }
  if (absl::Status s = network->Init(); !s.ok()) {
    logger.Error(kLog, absl::StrCat("no pod network: ", s.message(),
                                    ". Network namespaces need root; without it, run the agent "
                                    "with --network loopback (or auto)"));
    return 1;
  }
  std::unique_ptr<kube::HttpsServer> kubelet;
  if (o.kubelet_port != 0) {
    kube::HttpsServerOptions server_options;
    server_options.host = o.host_ip;
    server_options.port = o.kubelet_port;
    server_options.cert_file = o.tls_cert_file;
    server_options.key_file = o.tls_key_file;
    const std::string logs_dir = o.state_dir + "/logs";
    absl::StatusOr<std::unique_ptr<kube::HttpsServer>> server = kube::HttpsServer::Start(
        server_options, [logs_dir](const kube::HttpsRequest& request, kube::HttpsReply& reply) {
          na::HandleKubeletRequest(logs_dir, request, reply);
        });
    if (!server.ok()) {
      logger.Error(kLog, absl::StrCat("kubelet endpoint: ", server.status().message()));
      return 1;
    }
    kubelet = std::move(*server);
    logger.Info(kLog, absl::StrCat("kubelet endpoint (pods/log) on https://", o.host_ip, ":",
                                   kubelet->port()));
  }
  na::RealProcessLauncher launcher;
  na::NodeAgent agent(api, *network, launcher, clock, logger, options);
  if (absl::Status s = agent.Register(); !s.ok()) {
    logger.Error(kLog, absl::StrCat("registering node ", o.node_name, ": ", s.message()));
    return 1;
  }
  logger.Info(kLog, absl::StrCat("node ", o.node_name, " registered on ", config->server, " (cpu ",
                                 o.cpu, ", memory ", o.memory, ", pods ", o.pods, "); pods get ",
                                 network->Describe(), "; logs in ", o.state_dir, "/logs"));
  const absl::Duration interval = absl::Seconds(o.sync_seconds);
  std::string last_error;
  std::unique_ptr<na::NodeMonitor> monitor;
  if (o.node_monitor_grace_seconds > 0) {
    monitor = std::make_unique<na::NodeMonitor>(api, logger, o.node_name,
                                                absl::Seconds(o.node_monitor_grace_seconds),
                                                [] { return absl::Now(); });
  }
  std::string last_heartbeat_error, last_monitor_error;
  for (;;) {
    absl::Status beat = agent.Heartbeat();
    const std::string beat_error = beat.ok() ? "" : std::string(beat.message());
    if (beat_error != last_heartbeat_error && !beat_error.empty()) {
      logger.Warning(kLog, absl::StrCat("node lease: ", beat_error));
    }
    last_heartbeat_error = beat_error;
    if (monitor != nullptr) {
      absl::Status m = monitor->Check();
      const std::string monitor_error = m.ok() ? "" : std::string(m.message());
      if (monitor_error != last_monitor_error && !monitor_error.empty()) {
        logger.Warning(kLog, absl::StrCat("node monitor: ", monitor_error));
      }
      last_monitor_error = monitor_error;
    }
    absl::Status s = agent.SyncOnce();
    const std::string error = s.ok() ? "" : std::string(s.message());
    if (error != last_error && !error.empty()) logger.Warning(kLog, absl::StrCat("pass: ", error));
    last_error = error;
    const int sig = kubetrain::base::StopSignals::Wait(interval);
    if (sig == SIGTERM || sig == SIGINT) {
      logger.Info(kLog, absl::StrCat("signal ", sig, ": stopping every pod"));
      break;
    }
  }
  if (kubelet != nullptr) kubelet->Stop();  // ends every kubectl logs -f
  agent.Shutdown(absl::Seconds(o.shutdown_grace_seconds),
                 [](absl::Duration d) { absl::SleepFor(d); });
  logger.Info(kLog, "stopped");
  return 0;
}
