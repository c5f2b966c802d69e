// The real `kubetrain-operator` binary as a process: flags and exit codes,
// clear errors for bad configurations, and against the Kubernetes API
// emulator its probes, metrics, Lease, SIGTERM shutdown and fail-over
// between two replicas.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "operator/kube/cpprest_transport.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/kube_config.h"
#include "operator/kube/resource.h"
#include "testing/kube_emulator.h"
#include "tests/support/metrics_test_util.h"
#include "tests/support/running_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_files.h"
#include "tests/support/wait_for.h"

#ifndef KUBETRAIN_OPERATOR_BIN
#error "KUBETRAIN_OPERATOR_BIN must name the kubetrain-operator binary"
#endif

namespace kubetrain::operator_main {
namespace {

using ::kubetrain::testing_util::WaitFor;

using metrics::testing_util::HttpTry;
using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::RunningProcess;
using Clock = std::chrono::steady_clock;

constexpr char kBinary[] = KUBETRAIN_OPERATOR_BIN;
constexpr char kLease[] = "kubetrain-operator";

// A loopback port that is bound but never listens: connecting to it is
// refused, and no other test can take it while this object lives.
class RefusingPort {
 public:
  RefusingPort() : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~RefusingPort() { close(fd_); }
  RefusingPort(const RefusingPort&) = delete;
  RefusingPort& operator=(const RefusingPort&) = delete;
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

std::string WriteKubeconfig(const data::testing_util::TempDir& dir, const std::string& server) {
  const std::string path = dir.File("kubeconfig");
  data::testing_util::WritePlain(path, absl::StrCat(R"(apiVersion: v1
kind: Config
clusters:
- name: emulator
  cluster: {server: ")",
                                                    server, R"("}
users:
- name: tester
  user: {}
contexts:
- name: emulator
  context: {cluster: emulator, user: tester, namespace: default}
current-context: emulator
)"));
  return path;
}

// First capture of `pattern` in `text`, or "".
std::string Find(const std::string& text, const std::string& pattern) {
  std::smatch m;
  const std::regex re(pattern);
  return std::regex_search(text, m, re) && m.size() > 1 ? m[1].str() : "";
}

// One operator process against the emulator, on free ports.
class Operator {
 public:
  Operator(const std::string& kubeconfig, const std::vector<std::string>& extra_flags) {
    std::vector<std::string> argv = {kBinary,
                                     "--kubeconfig",
                                     kubeconfig,
                                     "--metrics-bind-address",
                                     "127.0.0.1:0",
                                     "--health-probe-bind-address",
                                     "127.0.0.1:0",
                                     "--webhook-bind-address",
                                     "127.0.0.1:0",
                                     "--webhook-host",
                                     "127.0.0.1",
                                     "--leader-election-namespace",
                                     "default",
                                     "--workers",
                                     "2"};
    argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
    process_ = std::make_unique<RunningProcess>(argv, std::vector<std::string>{});
  }

  // Waits for both servers (and the elector's identity, when electing).
  ::testing::AssertionResult WaitStarted() {
    if (!process_->WaitForOutput(
            [](const std::string& out) {
              return out.find("serving health probes on") != std::string::npos;
            },
            std::chrono::seconds(60))) {
      return ::testing::AssertionFailure() << "no probe server; output:\n" << process_->Output();
    }
    const std::string out = process_->Output();
    metrics_port_ =
        std::atoi(Find(out, R"(serving metrics on 127\.0\.0\.1:(\d+)/metrics)").c_str());
    health_port_ = std::atoi(Find(out, R"(serving health probes on 127\.0\.0\.1:(\d+))").c_str());
    identity_ = Find(out, R"(leader election on Lease \S+ as (\S+))");
    if (metrics_port_ <= 0 || health_port_ <= 0) {
      return ::testing::AssertionFailure() << "no ports in:\n" << out;
    }
    return ::testing::AssertionSuccess();
  }

  std::string Metrics() const { return HttpTry(metrics_port_, "/metrics").body; }
  bool IsLeader() const {
    return Metrics().find("\nkubetrain_operator_is_leader 1\n") != std::string::npos;
  }
  bool IsStandby() const {
    return Metrics().find("\nkubetrain_operator_is_leader 0\n") != std::string::npos;
  }
  int Probe(const std::string& path) const { return HttpTry(health_port_, path).status; }

  // SIGTERM; the exit code, and how long the exit took.
  int Terminate(std::chrono::milliseconds* took) {
    const auto start = Clock::now();
    process_->Signal(SIGTERM);
    const int code = process_->Wait(std::chrono::seconds(30));
    *took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    return code;
  }

  RunningProcess& process() { return *process_; }
  const std::string& identity() const { return identity_; }
  int metrics_port() const { return metrics_port_; }

 private:
  std::unique_ptr<RunningProcess> process_;
  int metrics_port_ = 0;
  int health_port_ = 0;
  std::string identity_;
};

class OperatorProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<testing::KubeEmulator>> emulator =
        testing::KubeEmulator::Start();
    ASSERT_TRUE(emulator.ok()) << emulator.status();
    emulator_ = *std::move(emulator);
    kubeconfig_ = WriteKubeconfig(dir_, emulator_->Url());
    kube::KubeConfig config;
    config.server = emulator_->Url();
    config.source = "emulator";
    absl::StatusOr<std::unique_ptr<kube::CpprestTransport>> transport =
        kube::CpprestTransport::Create(config, {}, env_, clock_);
    ASSERT_TRUE(transport.ok()) << transport.status();
    client_ = std::make_unique<kube::KubeClient>(*std::move(transport));
  }

  // The Lease's holderIdentity; nullopt while there is no Lease.
  std::optional<std::string> LeaseHolder() {
    absl::StatusOr<kube::Json> lease = client_->Get(kube::kLeases, "default", kLease);
    if (!lease.ok()) return std::nullopt;
    return lease->value("/spec/holderIdentity"_json_pointer, std::string());
  }

  data::testing_util::TempDir dir_;
  std::unique_ptr<testing::KubeEmulator> emulator_;
  std::string kubeconfig_;
  kube::RealConfigEnvironment env_;
  RealClock clock_;
  std::unique_ptr<kube::KubeClient> client_;
};

const std::vector<std::string> kFastElection = {
    "--lease-duration", "2s", "--renew-deadline", "1500ms", "--retry-period", "200ms"};

TEST(OperatorBinaryTest, HelpListsEveryFlag) {
  const testing_util::ProcessResult r =
      testing_util::RunProcess({kBinary, "--help"}, std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* flag : {"--kubeconfig",
                           "--namespace",
                           "--leader-elect=true",
                           "--leader-election-namespace",
                           "--leader-election-id NAME=kubetrain-operator",
                           "--lease-duration DURATION=15s",
                           "--renew-deadline DURATION=10s",
                           "--retry-period DURATION=2s",
                           "--metrics-bind-address ADDR=:8080",
                           "--health-probe-bind-address ADDR=:8081",
                           "--workers N=16",
                           "--kube-api-qps QPS=20",
                           "--kube-api-burst N=30",
                           "--gang-scheduler",
                           "--progress-interval DURATION=30s",
                           "--log-format FORMAT=text",
                           "--log-level LEVEL=info",
                           "--webhook-bind-address ADDR=:9443",
                           "--webhook-cert-dir",
                           "--webhook-secret-name NAME=kubetrain-webhook-cert",
                           "--webhook-service-name NAME=kubetrain-webhook",
                           "--webhook-config-name NAME=kubetrain-validating-webhook",
                           "--webhook-host"}) {
    EXPECT_THAT(r.out, HasSubstr(flag));
  }
}

TEST(OperatorBinaryTest, BadFlagExits2WithOneClearLine) {
  testing_util::ProcessResult r =
      testing_util::RunProcess({kBinary, "--gang-scheduler=kube-batch"}, std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "kubetrain-operator: error: --gang-scheduler: unknown gang scheduler 'kube-batch' "
            "(supported: \"\" for none, volcano)\n");

  r = testing_util::RunProcess({kBinary, "--lease-duration=5s"}, std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("kubetrain-operator: error: --lease-duration: must be greater "
                               "than --renew-deadline"));

  r = testing_util::RunProcess({kBinary, "--no-such-flag"}, std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("kubetrain-operator: error: "));
  EXPECT_THAT(r.err, HasSubstr("--no-such-flag"));
}

TEST(OperatorBinaryTest, MalformedKubeconfigExits1) {
  data::testing_util::TempDir dir;
  const std::string path = dir.File("kubeconfig");
  data::testing_util::WritePlain(path, "clusters: [unterminated\n  - {");
  const testing_util::ProcessResult r =
      testing_util::RunProcess({kBinary, "--kubeconfig", path}, std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("cannot load the Kubernetes configuration"));
  EXPECT_THAT(r.err, HasSubstr(path));
}

TEST(OperatorBinaryTest, MissingKubeconfigExits1) {
  const testing_util::ProcessResult r = testing_util::RunProcess(
      {kBinary, "--kubeconfig", "/nonexistent/kubeconfig"}, std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/kubeconfig"));
}

TEST(OperatorBinaryTest, UnreachableServerExits1) {
  data::testing_util::TempDir dir;
  const RefusingPort refusing;
  const std::string server = absl::StrCat("http://127.0.0.1:", refusing.port());
  const std::string path = WriteKubeconfig(dir, server);
  const testing_util::ProcessResult r =
      testing_util::RunProcess({kBinary, "--kubeconfig", path, "--metrics-bind-address=0",
                                "--health-probe-bind-address=0", "--webhook-bind-address=0"},
                               std::chrono::seconds(120));
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("cannot list TrainingJobs at ", server)));
}

TEST_F(OperatorProcessTest, MetricsAddressInUseExits1) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string address = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
  const testing_util::ProcessResult r = testing_util::RunProcess(
      {kBinary, "--kubeconfig", kubeconfig_, "--metrics-bind-address", address,
       "--health-probe-bind-address=0", "--webhook-bind-address=0"},
      std::chrono::seconds(60));
  close(fd);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("cannot serve metrics on ", address)));
}

TEST_F(OperatorProcessTest, LeadsServesProbesAndReleasesTheLeaseOnSigterm) {
  Operator op(kubeconfig_, kFastElection);
  ASSERT_TRUE(op.WaitStarted());
  ASSERT_THAT(op.identity(), ::testing::MatchesRegex("[^_ ]+_[0-9a-f]{8}"));

  EXPECT_EQ(op.Probe("/healthz"), 200);
  EXPECT_EQ(HttpTry(op.metrics_port(), "/healthz").status, 404);  // probes are on their own port
  EXPECT_EQ(op.Probe("/nothing-here"), 404);
  ASSERT_TRUE(WaitFor([&] { return op.Probe("/readyz") == 200; })) << op.process().Output();
  ASSERT_TRUE(WaitFor([&] { return op.IsLeader(); })) << op.Metrics();
  EXPECT_EQ(LeaseHolder(), op.identity());

  const std::string scrape = op.Metrics();
  for (const char* name :
       {"kubetrain_operator_reconcile_duration_seconds_bucket{le=\"0.001\"}",
        "\nkubetrain_operator_reconcile_errors_total ", "\nkubetrain_operator_workqueue_depth ",
        "\nkubetrain_operator_is_leader 1\n"}) {
    EXPECT_THAT(scrape, HasSubstr(name));
  }
  if (metrics::testing_util::HavePromtool()) {
    const metrics::testing_util::PromtoolResult lint =
        metrics::testing_util::PromtoolCheckMetrics(scrape);
    EXPECT_EQ(lint.exit_code, 0) << lint.output;
    EXPECT_EQ(lint.output, "");
  } else {
    std::cerr << "promtool not installed: scrape not linted\n";
  }

  std::chrono::milliseconds took{};
  EXPECT_EQ(op.Terminate(&took), 0) << op.process().Output();
  EXPECT_LT(took, std::chrono::seconds(8));
  EXPECT_EQ(LeaseHolder(), "");
  const std::string out = op.process().Output();
  EXPECT_THAT(out, HasSubstr("received SIGTERM"));
  EXPECT_THAT(out, HasSubstr("controller stopped"));
  EXPECT_THAT(out, HasSubstr("leader election stopped"));
  EXPECT_THAT(out, HasSubstr("exiting with code 0"));
}

TEST_F(OperatorProcessTest, WithoutLeaderElectionRunsAtOnceAndTakesNoLease) {
  Operator op(kubeconfig_, {"--leader-elect=false", "--log-format=json"});
  ASSERT_TRUE(op.WaitStarted());
  ASSERT_TRUE(WaitFor([&] { return op.Probe("/readyz") == 200; })) << op.process().Output();
  EXPECT_TRUE(op.IsLeader());
  EXPECT_EQ(LeaseHolder(), std::nullopt);
  // JSON log lines.
  EXPECT_TRUE(op.process().WaitForOutput(
      [](const std::string& out) {
        return out.find("\"msg\":\"controller running\"") != std::string::npos;
      },
      std::chrono::seconds(30)))
      << op.process().Output();

  std::chrono::milliseconds took{};
  EXPECT_EQ(op.Terminate(&took), 0) << op.process().Output();
  EXPECT_LT(took, std::chrono::seconds(8));
}

// A port free now (the webhook's URL must be known before the operator starts).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// The operator makes its webhook certificate, keeps it in a Secret, sets the
// configuration's caBundle, and the API server then refuses a scale above
// maxReplicas by asking it; a restarted operator keeps the same certificate.
TEST_F(OperatorProcessTest, ServesTheAdmissionWebhookAndTheApiRefusesAScaleAboveMaxReplicas) {
  const int port = FreePort();
  const std::string config_name = "kubetrain-validating-webhook";
  kube::Json config = {
      {"apiVersion", "admissionregistration.k8s.io/v1"},
      {"kind", "ValidatingWebhookConfiguration"},
      {"metadata", {{"name", config_name}}},
      {"webhooks",
       kube::Json::array(
           {{{"name", "validate.trainingjobs.kubetrain.io"},
             {"admissionReviewVersions", {"v1"}},
             {"sideEffects", "None"},
             {"clientConfig",
              {{"url", absl::StrCat("https://127.0.0.1:", port,
                                    "/validate-kubetrain-io-v1alpha1-trainingjob")}}},
             {"rules", kube::Json::array({{{"apiGroups", {"kubetrain.io"}},
                                           {"apiVersions", {"v1alpha1"}},
                                           {"operations", {"UPDATE"}},
                                           {"resources", {"trainingjobs/scale"}}}})}}})}};
  ASSERT_TRUE(client_->Create(kube::kValidatingWebhookConfigurations, "", config).ok());
  auto ca_bundle = [&] {
    absl::StatusOr<kube::Json> c =
        client_->Get(kube::kValidatingWebhookConfigurations, "", config_name);
    return c.ok() ? (*c)["webhooks"][0]["clientConfig"].value("caBundle", std::string()) : "";
  };
  const std::vector<std::string> flags = {"--leader-elect=false", "--webhook-bind-address",
                                          absl::StrCat("127.0.0.1:", port)};
  std::string bundle;
  {
    Operator op(kubeconfig_, flags);
    ASSERT_TRUE(op.WaitStarted());
    ASSERT_THAT(op.process().Output(),
                HasSubstr(absl::StrCat("serving the admission webhook on 127.0.0.1:", port)));
    bundle = ca_bundle();
    ASSERT_FALSE(bundle.empty()) << op.process().Output();
    absl::StatusOr<kube::Json> secret =
        client_->Get(kube::kSecrets, "default", "kubetrain-webhook-cert");
    ASSERT_TRUE(secret.ok()) << secret.status();
    EXPECT_EQ((*secret)["data"]["ca.crt"], bundle);

    kube::Json job = kube::Json::parse(R"({
      "apiVersion": "kubetrain.io/v1alpha1", "kind": "TrainingJob", "metadata": {"name": "fm"},
      "spec": {"elasticPolicy": {"minReplicas": 1, "maxReplicas": 3},
               "replicaSpecs": {"Worker": {"replicas": 2, "restartPolicy": "ExitCode",
                 "template": {"spec": {"containers": [{"name": "main", "image": "kt"}]}}}}}})");
    ASSERT_TRUE(client_->Create(kube::kTrainingJobs, "default", job).ok());
    absl::StatusOr<kube::Json> refused = client_->MergePatch(
        kube::kTrainingJobs, "default", "fm", kube::Json{{"spec", {{"replicas", 6}}}}, "scale");
    ASSERT_FALSE(refused.ok());
    EXPECT_THAT(refused.status().message(),
                HasSubstr("admission webhook \"validate.trainingjobs.kubetrain.io\" denied the "
                          "request: spec.replicas: Invalid value: 6: 6 is above "
                          "spec.elasticPolicy.maxReplicas 3"));
    EXPECT_TRUE(client_
                    ->MergePatch(kube::kTrainingJobs, "default", "fm",
                                 kube::Json{{"spec", {{"replicas", 3}}}}, "scale")
                    .ok());
    EXPECT_TRUE(op.process().WaitForOutput(
        [](const std::string& out) {
          return out.find("refused UPDATE trainingjobs/scale default/fm") != std::string::npos;
        },
        std::chrono::seconds(10)))
        << op.process().Output();
    std::chrono::milliseconds took{};
    EXPECT_EQ(op.Terminate(&took), 0) << op.process().Output();
  }
  // With no replica serving, failurePolicy Fail (the default) refuses too.
  absl::StatusOr<kube::Json> unserved = client_->MergePatch(
      kube::kTrainingJobs, "default", "fm", kube::Json{{"spec", {{"replicas", 2}}}}, "scale");
  ASSERT_FALSE(unserved.ok());
  EXPECT_THAT(unserved.status().message(),
              HasSubstr("failed calling webhook \"validate.trainingjobs.kubetrain.io\""));
  // Restarted, it serves the certificate it made: the caBundle stays.
  Operator again(kubeconfig_, flags);
  ASSERT_TRUE(again.WaitStarted());
  EXPECT_EQ(ca_bundle(), bundle);
  EXPECT_TRUE(client_
                  ->MergePatch(kube::kTrainingJobs, "default", "fm",
                               kube::Json{{"spec", {{"replicas", 2}}}}, "scale")
                  .ok());
}

TEST_F(OperatorProcessTest, SigintAlsoStopsCleanly) {
  Operator op(kubeconfig_, kFastElection);
  ASSERT_TRUE(op.WaitStarted());
  ASSERT_TRUE(WaitFor([&] { return op.IsLeader(); })) << op.process().Output();
  op.process().Signal(SIGINT);
  EXPECT_EQ(op.process().Wait(std::chrono::seconds(10)), 0) << op.process().Output();
  EXPECT_EQ(LeaseHolder(), "");
}

// A leader that cannot renew its Lease for --renew-deadline steps down and
// exits 1, so that it restarts as a clean standby.
TEST_F(OperatorProcessTest, LosingTheLeaseExits1) {
  Operator op(kubeconfig_, kFastElection);
  ASSERT_TRUE(op.WaitStarted());
  ASSERT_TRUE(WaitFor([&] { return op.IsLeader(); })) << op.process().Output();
  testing::FaultRule fail_renewals;
  fail_renewals.method = "PUT";
  fail_renewals.path_substring = "/leases/";
  fail_renewals.http_code = 500;
  fail_renewals.count = 1000000;
  emulator_->InjectFault(fail_renewals);
  EXPECT_EQ(op.process().Wait(std::chrono::seconds(60)), 1) << op.process().Output();
  const std::string out = op.process().Output();
  EXPECT_THAT(out, HasSubstr("leader election lost"));
  EXPECT_THAT(out, HasSubstr("controller stopped"));
}

TEST_F(OperatorProcessTest, TwoReplicasOneLeaderAndFailOver) {
  // A long lease and a short retry: a handover by release takes one retry,
  // one by expiry would take 10 s.
  const std::vector<std::string> election = {"--lease-duration", "10s",  "--renew-deadline", "8s",
                                             "--retry-period",   "200ms"};
  Operator a(kubeconfig_, election);
  Operator b(kubeconfig_, election);
  ASSERT_TRUE(a.WaitStarted());
  ASSERT_TRUE(b.WaitStarted());
  ASSERT_NE(a.identity(), b.identity());

  // Exactly one leads: the Lease names it, its gauge says 1, the other's 0.
  ASSERT_TRUE(WaitFor([&] {
    const std::optional<std::string> holder = LeaseHolder();
    return holder == a.identity() || holder == b.identity();
  }));
  Operator& leader = LeaseHolder() == a.identity() ? a : b;
  Operator& standby = &leader == &a ? b : a;
  ASSERT_TRUE(WaitFor([&] { return leader.IsLeader(); })) << leader.Metrics();
  EXPECT_TRUE(standby.IsStandby()) << standby.Metrics();
  // Both are ready: the standby as a standby, as in controller-runtime.
  EXPECT_TRUE(WaitFor([&] { return leader.Probe("/readyz") == 200; }));
  EXPECT_EQ(standby.Probe("/readyz"), 200);
  EXPECT_EQ(LeaseHolder(), leader.identity());  // still, after a while
  EXPECT_TRUE(standby.IsStandby());

  // The leader goes; it releases the Lease, so the standby takes over well
  // within the lease duration.
  std::chrono::milliseconds took{};
  EXPECT_EQ(leader.Terminate(&took), 0) << leader.process().Output();
  EXPECT_LT(took, std::chrono::seconds(8));
  const auto gone = Clock::now();
  ASSERT_TRUE(WaitFor([&] { return LeaseHolder() == standby.identity(); }, absl::Seconds(10)))
      << standby.process().Output();
  // Released, not expired: far less than waiting out the lease would take.
  EXPECT_LE(Clock::now() - gone, std::chrono::seconds(5));
  EXPECT_TRUE(WaitFor([&] { return standby.IsLeader(); })) << standby.Metrics();
  EXPECT_TRUE(WaitFor([&] { return standby.Probe("/readyz") == 200; }));
  EXPECT_TRUE(standby.process().WaitForOutput(
      [](const std::string& out) { return out.find("became the leader") != std::string::npos; },
      std::chrono::seconds(30)));

  EXPECT_EQ(standby.Terminate(&took), 0) << standby.process().Output();
  EXPECT_EQ(LeaseHolder(), "");
}

}  // namespace
}  // namespace kubetrain::operator_main
