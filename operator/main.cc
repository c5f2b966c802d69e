// The `kubetrain-operator` binary: parses its flags once, then wires the
// operator together: logger -> Kubernetes config -> REST transport -> client
// -> metrics (/metrics) -> health probes (/healthz, /readyz) -> leader
// election -> TrainingJobController.
//
// Readiness follows controller-runtime: a standby replica (leader election
// on, another replica leads) is ready, because it is healthy and able to take
// over; the leader is ready once its controller has synced its informers.
//
// Lifecycle: SIGTERM or SIGINT stops the controller (in-flight reconciles
// finish), then the elector (which releases the Lease so a standby takes
// over at once), then the servers, and exits 0. Losing leadership exits 1
// ("leader election lost") so the Deployment restarts a clean standby, as
// client-go's leader election does. Exit codes: 0 done, 1 failure, 2 bad
// flags.
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/training_job.h"
#include "base/clock.h"
#include "base/stop_signals.h"
#include "operator/controller/training_job_controller.h"
#include "operator/health_server.h"
#include "operator/kube/cpprest_transport.h"
#include "operator/kube/https_server.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/kube_config.h"
#include "operator/kube/leader_elector.h"
#include "operator/kube/logger.h"
#include "operator/kube/resource.h"
#include "operator/kube/throttled_transport.h"
#include "operator/metrics/metrics_endpoint.h"
#include "operator/metrics/prometheus_operator_metrics.h"
#include "operator/operator_options.h"
#include "operator/webhook/ca_bundle_keeper.h"
#include "operator/webhook/webhook_certs.h"
#include "operator/webhook/webhook_server.h"

namespace {

using kubetrain::operator_main::kProgramName;

constexpr char kLog[] = "operator";

// Why the process stops. The first reason wins; later ones (a failure caused
// by the shutdown itself) are ignored. Thread-safe.
class StopEvent {
 public:
  void Request(int exit_code, const std::string& reason) {
    absl::MutexLock lock(&mu_);
    if (requested_) return;
    requested_ = true;
    exit_code_ = exit_code;
    reason_ = reason;
  }
  bool requested() const {
    absl::MutexLock lock(&mu_);
    return requested_;
  }
  // Blocks until Request(); returns its exit code and reason.
  std::pair<int, std::string> Wait() const {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&requested_));
    return {exit_code_, reason_};
  }

 private:
  mutable absl::Mutex mu_;
  bool requested_ ABSL_GUARDED_BY(mu_) = false;
  int exit_code_ ABSL_GUARDED_BY(mu_) = 0;
  std::string reason_ ABSL_GUARDED_BY(mu_);
};

// Runs TrainingJobController::Start() on a thread of its own (it blocks
// until the informers synced, and must not hold up the elector's renewals),
// and stops the controller however far Start() got. Thread-safe.
class ControllerRunner {
 public:
  ControllerRunner(kubetrain::controller::TrainingJobController& controller, StopEvent& stop,
                   kubetrain::kube::Logger& logger)
      : controller_(controller), stop_(stop), logger_(logger) {}
  ~ControllerRunner() { Stop(); }
  ControllerRunner(const ControllerRunner&) = delete;
  ControllerRunner& operator=(const ControllerRunner&) = delete;

  // Starts the controller once; later calls and calls after Stop() do nothing.
  void Start() {
    absl::MutexLock lock(&mu_);
    if (stopping_ || started_) return;
    started_ = true;
    thread_ = std::thread([this] {
      logger_.Info(kLog, "starting the controller (waiting for informers to sync)");
      const absl::Status s = controller_.Start();
      if (absl::IsCancelled(s)) {
        logger_.Info(kLog, absl::StrCat("the controller did not start: ", s.message()));
        return;
      }
      if (!s.ok()) {
        logger_.Error(kLog, absl::StrCat("the controller failed to start: ", s.message()));
        stop_.Request(1, absl::StrCat("the controller failed to start: ", s.message()));
        return;
      }
      logger_.Info(kLog, "controller running");
    });
  }

  // Stops the controller: in-flight reconciles finish. Idempotent.
  void Stop() {
    std::thread thread;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      stopping_ = true;
      thread = std::move(thread_);
    }
    // Ends a Start() still waiting for informers; one not yet begun refuses.
    controller_.Stop();
    if (thread.joinable()) thread.join();
  }

 private:
  kubetrain::controller::TrainingJobController& controller_;
  StopEvent& stop_;
  kubetrain::kube::Logger& logger_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_ ABSL_GUARDED_BY(mu_);
};

std::string Hostname() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == 0) return "kubetrain-operator";
  return name;
}

uint32_t RandomSuffix() {
  std::random_device device;
  return static_cast<uint32_t>(device());
}

// The validating admission webhook (operator/webhook/), on every replica
// (kube-apiserver calls whichever the Service picks), with its certificate
// from --webhook-cert-dir or the Secret it keeps, and that certificate set
// as the configuration's caBundle. Null when disabled.
absl::StatusOr<std::unique_ptr<kubetrain::webhook::WebhookServer>> StartWebhook(
    const kubetrain::operator_main::OperatorOptions& o, kubetrain::kube::KubeClient& client,
    const kubetrain::kube::KubeConfig& config, const kubetrain::kube::ConfigEnvironment& env,
    const kubetrain::Clock& clock, kubetrain::kube::Logger& logger,
    std::unique_ptr<kubetrain::webhook::CaBundleKeeper>* keeper,
    std::unique_ptr<kubetrain::kube::KubeClient>* lookup_client) {
  namespace kube = kubetrain::kube;
  namespace webhook = kubetrain::webhook;
  if (!o.webhook_bind_address.enabled) {
    logger.Info(kLog,
                "admission webhook disabled (--webhook-bind-address=0): a scale outside "
                "spec.elasticPolicy is clamped, not refused");
    return nullptr;
  }
  kube::HttpsServerOptions https;
  const std::string& host = o.webhook_bind_address.host;
  https.host = host.empty() ? "0.0.0.0" : host == "localhost" ? "127.0.0.1" : host;
  https.port = o.webhook_bind_address.port;
  if (!o.webhook_cert_dir.empty()) {
    https.cert_file = absl::StrCat(o.webhook_cert_dir, "/tls.crt");
    https.key_file = absl::StrCat(o.webhook_cert_dir, "/tls.key");
  } else {
    webhook::WebhookCertOptions certs;
    certs.ns = kubetrain::operator_main::ResolveLeaderElectionNamespace(o, config, env);
    certs.secret_name = o.webhook_secret_name;
    certs.service_name = o.webhook_service_name;
    certs.extra_hosts = o.webhook_hosts;
    absl::StatusOr<kube::ServingCert> cert =
        webhook::EnsureServingCert(client, certs, absl::FromUnixMicros(clock.UnixMicros()), logger);
    if (!cert.ok()) {
      return absl::Status(
          cert.status().code(),
          absl::StrCat("the admission webhook's certificate: ", cert.status().message(),
                       " (or run with --webhook-cert-dir, or without the webhook: "
                       "--webhook-bind-address=0)"));
    }
    https.cert_pem = cert->cert_pem;
    https.key_pem = cert->key_pem;
    // Set now and kept set: the configuration may come later, or be
    // written again without it.
    *keeper = std::make_unique<webhook::CaBundleKeeper>(
        client, o.webhook_config_name, cert->cert_pem, clock, logger, absl::Seconds(10));
    if (absl::Status s = (*keeper)->Check(); absl::IsPermissionDenied(s)) {
      return absl::Status(s.code(),
                          absl::StrCat("the admission webhook's caBundle: ", s.message()));
    }
    (*keeper)->Start();
  }
  // The job a Scale names is read on a client of its own, outside the
  // process's rate limit: kube-apiserver waits for the answer (timeoutSeconds)
  // and must not wait behind a backlog of reconciles. One GET per scale.
  absl::StatusOr<std::unique_ptr<kube::CpprestTransport>> transport =
      kube::CpprestTransport::Create(config, kube::TransportOptions{}, env, clock);
  if (!transport.ok()) return transport.status();
  *lookup_client = std::make_unique<kube::KubeClient>(*std::move(transport));
  kube::KubeClient& reader = **lookup_client;
  absl::StatusOr<std::unique_ptr<webhook::WebhookServer>> server = webhook::WebhookServer::Start(
      https,
      [&reader](const std::string& ns,
                const std::string& name) -> absl::StatusOr<kubetrain::api::TrainingJob> {
        absl::StatusOr<kube::Json> job = reader.Get(kube::kTrainingJobs, ns, name);
        if (!job.ok()) return job.status();
        return kubetrain::api::FromJson(*job);
      },
      logger);
  if (!server.ok()) {
    return absl::Status(server.status().code(),
                        absl::StrCat("the admission webhook on ", o.webhook_bind_address.ToString(),
                                     ": ", server.status().message()));
  }
  logger.Info(kLog, absl::StrCat("serving the admission webhook on ", https.host, ":",
                                 (*server)->port(), webhook::kValidatePath));
  return server;
}

// The operator, once the flags are parsed. Returns the exit code.
int RunOperator(const kubetrain::operator_main::OperatorOptions& o) {
  namespace kube = kubetrain::kube;
  namespace metrics_ns = kubetrain::operator_metrics;
  kube::StreamLogger logger(std::cerr, o.log_format, o.log_level);
  logger.Info(kLog,
              absl::StrCat("kubetrain-operator starting: namespace ",
                           o.watch_namespace.empty() ? "(all)" : o.watch_namespace, ", workers ",
                           o.workers, ", action threads ", o.action_threads, ", leader election ",
                           o.leader_elect ? "on" : "off", ", gang scheduler ",
                           o.gang_scheduler.empty() ? "(none)" : o.gang_scheduler,
                           ", nodes watched: ", o.watch_nodes ? "yes" : "no"));

  StopEvent stop;
  // The first SIGTERM or SIGINT asks for a clean shutdown; a second one, while
  // shutting down, exits at once.
  kubetrain::base::StopSignalThread signals([&stop, &logger](int sig, int count) {
    const char* name = kubetrain::base::StopSignals::Name(sig);
    if (count > 1) {
      logger.Error(kLog,
                   absl::StrCat("received ", name, " again while shutting down: exiting now"));
      std::_Exit(1);
    }
    logger.Info(kLog, absl::StrCat("received ", name, ": shutting down"));
    stop.Request(0, absl::StrCat("received ", name));
  });
  kube::RealConfigEnvironment env;
  kubetrain::RealClock clock;

  // Kubernetes API.
  absl::StatusOr<kube::KubeConfig> config = kube::ResolveKubeConfig(o.kubeconfig, "", env);
  if (!config.ok()) {
    logger.Error(kLog, absl::StrCat("cannot load the Kubernetes configuration: ",
                                    config.status().message()));
    return 1;
  }
  logger.Info(kLog, absl::StrCat("Kubernetes API ", config->server, " from ", config->source));
  absl::StatusOr<std::unique_ptr<kube::CpprestTransport>> transport =
      kube::CpprestTransport::Create(*config, kube::TransportOptions{}, env, clock);
  if (!transport.ok()) {
    logger.Error(kLog, absl::StrCat("cannot use the Kubernetes configuration from ", config->source,
                                    ": ", transport.status().message()));
    return 1;
  }
  // One rate limit for every request of this process (informers, workers,
  // events, leader election), as a controller-runtime manager has; the one
  // exception is the admission webhook's read of a scaled job (StartWebhook).
  auto throttled =
      std::make_unique<kube::ThrottledTransport>(std::move(*transport), o.throttle, clock);
  kube::ThrottledTransport* const throttle = throttled.get();  // the client owns it
  kube::KubeClient client(std::move(throttled));
  logger.Info(kLog, o.throttle.qps > 0 ? absl::StrCat("client rate limit: ", o.throttle.qps,
                                                      " requests/s, burst ", o.throttle.burst)
                                       : std::string("client rate limit: none"));
  // Fail fast with a clear message when the API is unreachable, the
  // credentials are refused or the CRD is missing, instead of retrying in
  // the informers.
  {
    kube::ListOptions probe;
    probe.limit = 1;
    absl::StatusOr<kube::ObjectList> jobs =
        client.List(kube::kTrainingJobs, o.watch_namespace, probe);
    if (!jobs.ok()) {
      const std::string hint = absl::IsNotFound(jobs.status())
                                   ? " (is the TrainingJob CRD installed? kubectl apply -f crds/)"
                                   : "";
      logger.Error(kLog, absl::StrCat("cannot list TrainingJobs at ", config->server, ": ",
                                      jobs.status().message(), hint));
      return 1;
    }
    logger.Info(kLog, "Kubernetes API reachable, TrainingJob CRD present");
  }

  // The admission webhook, before the controller: a scale above
  // maxReplicas is refused as soon as this replica runs.
  std::unique_ptr<kubetrain::webhook::CaBundleKeeper> ca_bundle_keeper;
  std::unique_ptr<kube::KubeClient> webhook_reader;  // outlives the webhook server
  absl::StatusOr<std::unique_ptr<kubetrain::webhook::WebhookServer>> webhook_server =
      StartWebhook(o, client, *config, env, clock, logger, &ca_bundle_keeper, &webhook_reader);
  if (!webhook_server.ok()) {
    logger.Error(kLog, std::string(webhook_server.status().message()));
    return 1;
  }

  // Metrics.
  auto registry = std::make_shared<prometheus::Registry>();
  metrics_ns::PrometheusOperatorMetrics metrics(*registry);
  metrics.SetLeader(!o.leader_elect);
  std::unique_ptr<metrics_ns::MetricsEndpoint> metrics_endpoint;
  if (o.metrics_bind_address.enabled) {
    absl::StatusOr<std::unique_ptr<metrics_ns::MetricsEndpoint>> endpoint =
        metrics_ns::MetricsEndpoint::Start(o.metrics_bind_address.CivetwebPorts(),
                                           o.metrics_bind_address.ToString(), registry);
    if (!endpoint.ok()) {
      logger.Error(kLog, std::string(endpoint.status().message()));
      return 1;
    }
    metrics_endpoint = std::move(*endpoint);
    logger.Info(kLog, absl::StrCat("serving metrics on ", o.metrics_bind_address.host, ":",
                                   metrics_endpoint->port(), "/metrics"));
  } else {
    logger.Info(kLog, "metrics disabled (--metrics-bind-address=0)");
  }

  // Controller and leader election.
  kubetrain::controller::ControllerOptions controller_options =
      kubetrain::operator_main::ToControllerOptions(o);
  controller_options.queue_observer = metrics.queue_observer();
  kubetrain::controller::TrainingJobController controller(client, std::move(controller_options),
                                                          &metrics, clock, &logger);
  ControllerRunner runner(controller, stop, logger);
  std::unique_ptr<kube::LeaderElector> elector;
  std::atomic<bool> electing{false};
  if (o.leader_elect) {
    const std::string identity =
        kubetrain::operator_main::LeaderElectionIdentity(Hostname(), RandomSuffix());
    const std::string lease_namespace =
        kubetrain::operator_main::ResolveLeaderElectionNamespace(o, *config, env);
    kube::LeaderCallbacks callbacks;
    callbacks.on_started_leading = [&] {
      logger.Info(kLog, absl::StrCat("became the leader as ", identity));
      metrics.SetLeader(true);
      runner.Start();
    };
    callbacks.on_stopped_leading = [&] {
      logger.Info(kLog, "stopped leading");
      metrics.SetLeader(false);
    };
    callbacks.on_new_leader = [&](const std::string& leader) {
      if (leader != identity) logger.Info(kLog, absl::StrCat("the leader is ", leader));
    };
    elector = std::make_unique<kube::LeaderElector>(
        client, kubetrain::operator_main::ToLeaderElectionConfig(o, lease_namespace, identity),
        std::move(callbacks), clock, &logger);
    logger.Info(kLog, absl::StrCat("leader election on Lease ", lease_namespace, "/",
                                   o.leader_election_id, " as ", identity));
  }

  // Health probes.
  std::unique_ptr<kubetrain::operator_main::HealthServer> health;
  if (o.health_probe_bind_address.enabled) {
    kubetrain::operator_main::HealthChecks checks;
    checks.live = [] { return absl::OkStatus(); };
    checks.ready = [&]() -> absl::Status {
      if (stop.requested()) return absl::UnavailableError("shutting down");
      if (controller.Ready()) return absl::OkStatus();
      if (elector != nullptr) {
        if (!electing.load()) return absl::UnavailableError("leader election not running");
        // A standby is ready: it is healthy and can take over.
        if (!elector->IsLeader()) return absl::OkStatus();
        return absl::UnavailableError("leading; controller informers not synced yet");
      }
      return absl::UnavailableError("controller informers not synced yet");
    };
    absl::StatusOr<std::unique_ptr<kubetrain::operator_main::HealthServer>> server =
        kubetrain::operator_main::HealthServer::Start(o.health_probe_bind_address.CivetwebPorts(),
                                                      o.health_probe_bind_address.ToString(),
                                                      std::move(checks));
    if (!server.ok()) {
      logger.Error(kLog, std::string(server.status().message()));
      return 1;
    }
    health = std::move(*server);
    logger.Info(kLog, absl::StrCat("serving health probes on ", o.health_probe_bind_address.host,
                                   ":", health->port(), " (/healthz, /readyz)"));
  } else {
    logger.Info(kLog, "health probes disabled (--health-probe-bind-address=0)");
  }

  // Run.
  std::thread elector_thread;
  if (elector != nullptr) {
    electing.store(true);
    elector_thread = std::thread([&] {
      absl::Status s;
      try {
        s = elector->Run();
      } catch (const std::exception& e) {  // no exception may leave a thread
        s = absl::InternalError(absl::StrCat("exception: ", e.what()));
      }
      electing.store(false);
      if (absl::IsAborted(s)) {
        logger.Error(kLog, "leader election lost");
        stop.Request(1, "leader election lost");
      } else if (!s.ok()) {
        logger.Error(kLog, absl::StrCat("leader election failed: ", s.message()));
        stop.Request(1, absl::StrCat("leader election failed: ", s.message()));
      }
    });
  } else {
    runner.Start();
  }

  const auto [exit_code, reason] = stop.Wait();
  logger.Info(kLog, absl::StrCat("shutting down: ", reason));
  // A backlog (hundreds of jobs at the client rate limit) must not keep a
  // stopping operator past its grace period: requests waiting for their
  // turn are dropped, queued passes and plans are dropped, in-flight
  // passes end; the level-triggered successor redoes whatever was left.
  throttle->Interrupt();
  runner.Stop();
  logger.Info(kLog, "controller stopped");
  if (elector != nullptr) {
    elector->Stop();
    elector_thread.join();
    logger.Info(kLog, "leader election stopped");
  }
  metrics.SetLeader(false);
  health.reset();
  metrics_endpoint.reset();
  ca_bundle_keeper.reset();
  webhook_server->reset();
  logger.Info(kLog, absl::StrCat("exiting with code ", exit_code));
  return exit_code;
}

// glibc's allocator, tuned for a controller whose live heap is small (the
// caches, about 45 MiB for 500 jobs) but which parses many short-lived JSON
// bodies on ~90 threads: by default each thread may take an arena of its
// own (up to 8 per core) and keeps what it freed, and the mmap threshold
// grows with the largest body freed so list pages end up in the arenas too.
// Measured on a real API server (docs/benchmarks.md): peak RSS after a
// restart on 500 jobs went from 130-150 MiB to 89-95 MiB. An operator
// started with GLIBC_TUNABLES set keeps those settings instead.
void TuneMalloc() {
#ifdef __GLIBC__
  if (std::getenv("GLIBC_TUNABLES") != nullptr) return;
  mallopt(M_ARENA_MAX, 2);
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);  // fixed: no dynamic growth
  mallopt(M_TRIM_THRESHOLD, 128 * 1024);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread exists, so every thread inherits the mask and only
  // the StopSignalThread takes SIGTERM/SIGINT.
  kubetrain::base::StopSignals::Block();
  TuneMalloc();

  const std::vector<std::string> args(argv, argv + argc);
  absl::StatusOr<kubetrain::operator_main::CommandLine> command_line =
      kubetrain::operator_main::ParseCommandLine(args);
  if (!command_line.ok()) {
    std::cerr << kProgramName << ": error: " << command_line.status().message() << std::endl;
    return 2;
  }
  switch (command_line->action) {
    case kubetrain::operator_main::CommandLine::Action::kPrintHelp:
    case kubetrain::operator_main::CommandLine::Action::kPrintVersion:
      std::cout << command_line->text << std::flush;
      return 0;
    case kubetrain::operator_main::CommandLine::Action::kRun:
      break;
  }
  return RunOperator(command_line->options);
}
