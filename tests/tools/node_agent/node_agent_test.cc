#include "tools/node_agent/node_agent.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "operator/kube/object.h"
#include "tests/support/temp_files.h"
#include "tests/tools/node_agent/fake_node_api.h"
#include "tests/tools/node_agent/fake_port_allocator.h"
#include "tools/node_agent/container_log_index.h"
#include "tools/node_agent/loopback_network.h"

namespace kubetrain::node_agent {
namespace {

using Json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class FakeNetwork final : public PodNetwork {
 public:
  absl::Status Init() override { return absl::OkStatus(); }
  absl::StatusOr<PodAttachment> Attach(const std::string& key, const std::string& uid) override {
    if (fail_attach) return absl::PermissionDeniedError("RTNETLINK: Operation not permitted");
    PodAttachment a;
    a.ip = absl::StrCat("10.0.0.", ++next);
    a.netns = "ns-" + uid;
    a.exec_prefix = {"enter", a.netns};
    attached[a.netns] = key;
    return a;
  }
  absl::Status WriteHosts(const PodAttachment& a, const std::string& contents) override {
    hosts[a.netns] = contents;
    return absl::OkStatus();
  }
  absl::Status Detach(const PodAttachment& a) override {
    attached.erase(a.netns);
    return absl::OkStatus();
  }
  std::string Describe() const override { return "fake"; }
  bool fail_attach = false;
  int next = 1;
  std::map<std::string, std::string> attached;
  std::map<std::string, std::string> hosts;
};

// Processes that run until the test ends them.
class FakeLauncher final : public ProcessLauncher {
 public:
  absl::StatusOr<int> Launch(const LaunchSpec& spec) override {
    const int pid = next_pid++;
    launched[pid] = spec;
    running.insert(pid);
    return pid;
  }
  void SignalGroup(int pid, int signal) override {
    signals.push_back({pid, signal});
    if (signal == SIGKILL || (signal == SIGTERM && !ignore_term)) Exit(pid, 128 + signal);
  }
  std::optional<int> PollExit(int pid) override {
    auto it = exits.find(pid);
    if (it == exits.end()) return std::nullopt;
    const int code = it->second;
    exits.erase(it);
    return code;
  }
  void Exit(int pid, int code) {
    if (running.erase(pid)) exits[pid] = code;
  }
  // The pid of the last launch whose argv contains `word`.
  int PidOf(const std::string& word) const {
    int found = 0;
    for (const auto& [pid, spec] : launched) {
      for (const std::string& a : spec.argv) {
        if (a == word) found = pid;
      }
    }
    return found;
  }
  int next_pid = 100;
  bool ignore_term = false;
  std::map<int, LaunchSpec> launched;
  std::set<int> running;
  std::map<int, int> exits;
  std::vector<std::pair<int, int>> signals;
};

Json MakePod(const std::string& name, const std::string& restart_policy,
             const std::string& cpu = "500m") {
  Json pod = Json::parse(R"json({
    "metadata": {"namespace": "team", "labels": {"job": "j"}},
    "spec": {"containers": [{"name": "main", "image": "kubetrain:0.1.0",
      "args": ["train", "$(WHO)"],
      "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "tok", "key": "token"}}},
              {"name": "WHO", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
      "resources": {"requests": {"memory": "1Gi"}}}]},
    "status": {"phase": "Pending"}})json");
  pod["metadata"]["name"] = name;
  pod["metadata"]["uid"] = "uid-" + name;
  pod["metadata"]["labels"]["name"] = name;
  pod["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z";
  pod["spec"]["restartPolicy"] = restart_policy;
  pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu;
  return pod;
}

class NodeAgentTest : public ::testing::Test {
 protected:
  NodeAgentTest() {
    options_.node_name = "n1";
    options_.capacity = {2000, int64_t{8} << 30, 10};
    options_.entrypoint = "/opt/kubetrain";
    options_.state_dir = dir_.path();
    options_.restart_backoff = absl::Seconds(1);
    options_.wall_now = [] { return absl::FromUnixSeconds(1700000000); };
    api_.keys["Secret/team/tok/token"] = "s3cret";
    agent_ = std::make_unique<NodeAgent>(api_, network_, launcher_, clock_, logger_, options_);
  }
  void Add(const Json& pod) { api_.pods["team/" + kube::Name(pod)] = pod; }
  void Sync() { ASSERT_TRUE(agent_->SyncOnce().ok()); }
  std::string Phase(const std::string& name) {
    return kube::StringAt(api_.Pod("team/" + name), {"status", "phase"});
  }
  Json ContainerStatus(const std::string& name) {
    return api_.Pod("team/" + name)["status"]["containerStatuses"][0];
  }

  data::testing_util::TempDir dir_;
  FakeApi api_;
  FakeNetwork network_;
  FakeLauncher launcher_;
  FakeClock clock_;
  kube::NullLogger logger_;
  NodeAgentOptions options_;
  std::unique_ptr<NodeAgent> agent_;
};

TEST_F(NodeAgentTest, RegistersANodeWithItsCapacity) {
  ASSERT_TRUE(agent_->Register().ok());
  EXPECT_EQ(kube::Name(api_.node), "n1");
  EXPECT_EQ(api_.node["status"]["capacity"]["cpu"], "2000m");
  EXPECT_EQ(api_.node["status"]["allocatable"]["memory"], absl::StrCat(int64_t{8} << 30));
  EXPECT_EQ(api_.node["status"]["conditions"][0]["type"], "Ready");
  EXPECT_EQ(api_.node["status"]["conditions"][0]["status"], "True");
}

// kube-apiserver proxies pods/log to the first address of its preferred
// types (Hostname first) and the published kubelet port.
TEST_F(NodeAgentTest, PublishesItsKubeletEndpointAtTheHostAddress) {
  options_.host_ip = "10.0.0.7";
  options_.kubelet_port = 10250;
  agent_ = std::make_unique<NodeAgent>(api_, network_, launcher_, clock_, logger_, options_);
  ASSERT_TRUE(agent_->Register().ok());
  EXPECT_EQ(api_.node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"], 10250);
  EXPECT_EQ(api_.node["status"]["addresses"],
            Json::parse(R"([{"type": "InternalIP", "address": "10.0.0.7"},
                            {"type": "Hostname", "address": "10.0.0.7"}])"));
}

// Each run's place in the appended log, so the kubelet endpoint can serve
// the current run and --previous apart.
TEST_F(NodeAgentTest, IndexesEachRunOfAContainerInItsLog) {
  Add(MakePod("w", "Always"));
  Sync();
  const std::string log = agent_->LogPath("team", "w", "main");
  std::ofstream(log, std::ios::app) << "run one\n";
  launcher_.Exit(launcher_.PidOf("w"), 137);
  Sync();
  clock_.AdvanceSeconds(1.1);  // the restart back-off
  Sync();
  ASSERT_EQ(launcher_.launched.size(), 2u);
  std::ofstream(log, std::ios::app) << "run two\n";
  std::ifstream in(RunIndexPath(log));
  std::stringstream index;
  index << in.rdbuf();
  EXPECT_EQ(index.str(), "start 0\nend 8 137\nstart 8\n");
}

// The kubelet's heartbeat: the node's Lease in kube-node-lease, renewed
// every quarter of its duration (10 s of 40 s), not on every pass.
TEST_F(NodeAgentTest, RenewsItsNodeLeaseEveryQuarterOfItsDuration) {
  ASSERT_TRUE(agent_->Heartbeat().ok());
  ASSERT_EQ(api_.leases.size(), 1u);
  const Json& lease = api_.leases[0];
  EXPECT_EQ(lease["apiVersion"], "coordination.k8s.io/v1");
  EXPECT_EQ(kube::Namespace(lease), "kube-node-lease");
  EXPECT_EQ(kube::Name(lease), "n1");
  EXPECT_EQ(lease["spec"]["holderIdentity"], "n1");
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 40);
  EXPECT_EQ(lease["spec"]["renewTime"], "2023-11-14T22:13:20.000000Z");
  clock_.AdvanceSeconds(9.9);
  ASSERT_TRUE(agent_->Heartbeat().ok());
  EXPECT_EQ(api_.leases.size(), 1u) << "not before 10 s";
  clock_.AdvanceSeconds(0.2);
  ASSERT_TRUE(agent_->Heartbeat().ok());
  EXPECT_EQ(api_.leases.size(), 2u);
}

// The API server's NodeTaint admission puts node.kubernetes.io/not-ready on
// a new Node; the node lifecycle controller takes it off once the node is
// Ready. Registering Ready, the agent does (and unreachable, which a
// monitor set while it was away), and leaves other taints alone.
TEST_F(NodeAgentTest, RegisteringReadyTakesTheLifecycleTaintsOff) {
  api_.node = Json{
      {"metadata", {{"name", "n1"}}},
      {"spec",
       {{"taints", Json::array({{{"key", "node.kubernetes.io/not-ready"}, {"effect", "NoSchedule"}},
                                {{"key", "gpu"}, {"effect", "NoSchedule"}}})}}}};
  ASSERT_TRUE(agent_->Register().ok());
  EXPECT_EQ(api_.node["spec"]["taints"], Json::array({{{"key", "gpu"}, {"effect", "NoSchedule"}}}));
}

TEST_F(NodeAgentTest, BindsWhatFitsAndMarksTheRestUnschedulable) {
  Add(MakePod("a", "Never", "1500m"));
  Add(MakePod("b", "Never", "1"));  // 1.5 + 1 > 2 cpus
  Sync();
  EXPECT_THAT(api_.bindings, ElementsAre("team/a"));
  const Json cond = api_.Pod("team/b")["status"]["conditions"][0];
  EXPECT_EQ(cond["reason"], "Unschedulable");
  EXPECT_THAT(cond["message"].get<std::string>(), HasSubstr("Insufficient cpu"));
  // a ends: its cpu is free again, and b is bound.
  launcher_.Exit(launcher_.PidOf("a"), 0);
  Sync();
  EXPECT_EQ(Phase("a"), "Succeeded");
  Sync();
  EXPECT_THAT(api_.bindings, ElementsAre("team/a", "team/b"));
}

// A taint the pod does not tolerate keeps it off this node (another may
// take it: it is not marked Unschedulable); once the taint is gone it is
// bound on the next pass, as the node is read afresh while a pod waits.
TEST_F(NodeAgentTest, ATaintedNodeTakesOnlyPodsThatTolerateIt) {
  ASSERT_TRUE(agent_->Register().ok());
  api_.node["spec"]["taints"] =
      Json::array({{{"key", "e2e"}, {"value", "x"}, {"effect", "NoSchedule"}}});
  Json tolerant = MakePod("t", "Never", "100m");
  tolerant["spec"]["tolerations"] = Json::array({{{"key", "e2e"}, {"operator", "Exists"}}});
  Add(tolerant);
  Add(MakePod("w", "Never", "100m"));
  Sync();
  EXPECT_THAT(api_.bindings, ElementsAre("team/t"));
  EXPECT_FALSE(api_.Pod("team/w")["status"].contains("conditions"));
  api_.node["spec"].erase("taints");
  Sync();
  EXPECT_THAT(api_.bindings, ElementsAre("team/t", "team/w"));
}

// A taint written a moment before a pod is created is honoured even though
// the node was read less than a second earlier (the e2e tests taint a node,
// then create a job at once).
TEST_F(NodeAgentTest, ATaintWrittenJustBeforeAPodIsSeen) {
  ASSERT_TRUE(agent_->Register().ok());
  Sync();  // the node read with no taint
  api_.node["spec"]["taints"] =
      Json::array({{{"key", "e2e"}, {"value", "x"}, {"effect", "NoSchedule"}}});
  Add(MakePod("w", "Never", "100m"));
  Sync();
  EXPECT_THAT(api_.bindings, IsEmpty());
}

TEST_F(NodeAgentTest, RunsTheContainerInItsNetworkWithItsEnvironment) {
  Add(MakePod("w", "Never"));
  Sync();
  const int pid = launcher_.PidOf("w");
  ASSERT_NE(pid, 0);
  const LaunchSpec& spec = launcher_.launched[pid];
  EXPECT_THAT(spec.argv, ElementsAre("enter", "ns-uid-w", "/opt/kubetrain", "train", "w"));
  EXPECT_THAT(spec.env,
              ::testing::Contains(std::make_pair(std::string("TOKEN"), std::string("s3cret"))));
  EXPECT_EQ(spec.log_path, dir_.path() + "/logs/team/w/main.log");
  EXPECT_EQ(Phase("w"), "Running");
  const Json status = api_.Pod("team/w")["status"];
  EXPECT_EQ(status["podIP"], "10.0.0.2");
  EXPECT_EQ(ContainerStatus("w")["ready"], true);
  EXPECT_TRUE(ContainerStatus("w")["state"].contains("running"));
}

TEST_F(NodeAgentTest, AMissingSecretWaitsWithTheReasonAndRetries) {
  api_.keys.clear();
  Add(MakePod("w", "Never"));
  Sync();
  EXPECT_EQ(launcher_.PidOf("w"), 0);
  EXPECT_EQ(Phase("w"), "Pending");
  EXPECT_EQ(ContainerStatus("w")["state"]["waiting"]["reason"], "CreateContainerConfigError");
  api_.keys["Secret/team/tok/token"] = "s3cret";
  clock_.AdvanceSeconds(1.5);
  Sync();
  EXPECT_NE(launcher_.PidOf("w"), 0);
  EXPECT_EQ(Phase("w"), "Running");
}

TEST_F(NodeAgentTest, ANetworkThatFailsToAttachIsRetriedAndThePodWaits) {
  network_.fail_attach = true;
  Add(MakePod("w", "Never"));
  Sync();
  EXPECT_EQ(launcher_.PidOf("w"), 0);
  EXPECT_EQ(Phase("w"), "Pending");
  EXPECT_EQ(ContainerStatus("w")["state"]["waiting"]["reason"], "NetworkNotReady");
  network_.fail_attach = false;
  Sync();  // still backing off
  EXPECT_EQ(launcher_.PidOf("w"), 0);
  clock_.AdvanceSeconds(1.5);
  Sync();
  EXPECT_NE(launcher_.PidOf("w"), 0);
  EXPECT_EQ(Phase("w"), "Running");
  EXPECT_EQ(api_.Pod("team/w")["status"]["podIP"], "10.0.0.2");
}

TEST_F(NodeAgentTest, OnFailureRestartsInPlaceAfterBackoffAndCounts) {
  Add(MakePod("ps", "OnFailure"));
  Sync();
  const int first = launcher_.PidOf("ps");
  launcher_.Exit(first, 137);
  Sync();
  EXPECT_EQ(ContainerStatus("ps")["restartCount"], 1);
  EXPECT_EQ(ContainerStatus("ps")["lastState"]["terminated"]["exitCode"], 137);
  EXPECT_EQ(ContainerStatus("ps")["lastState"]["terminated"]["signal"], 9);
  EXPECT_EQ(ContainerStatus("ps")["state"]["waiting"]["reason"], "CrashLoopBackOff");
  EXPECT_EQ(launcher_.launched.size(), 1u);  // still backing off
  clock_.AdvanceSeconds(1.1);
  Sync();
  EXPECT_EQ(launcher_.launched.size(), 2u);
  EXPECT_EQ(Phase("ps"), "Running");
  // Same network: an in-place restart keeps the pod's address.
  EXPECT_EQ(api_.Pod("team/ps")["status"]["podIP"], "10.0.0.2");
  // Exit 0 under OnFailure ends the pod.
  launcher_.Exit(launcher_.PidOf("ps"), 0);
  Sync();
  EXPECT_EQ(Phase("ps"), "Succeeded");
  EXPECT_TRUE(network_.attached.empty());
}

TEST_F(NodeAgentTest, NeverFailsThePodWithTheExitCode) {
  Add(MakePod("w", "Never"));
  Sync();
  launcher_.Exit(launcher_.PidOf("w"), 129);
  Sync();
  EXPECT_EQ(Phase("w"), "Failed");
  EXPECT_EQ(ContainerStatus("w")["state"]["terminated"]["exitCode"], 129);
  EXPECT_EQ(ContainerStatus("w")["restartCount"], 0);
  EXPECT_EQ(launcher_.launched.size(), 1u);
  // A failed pod is never started again.
  clock_.AdvanceSeconds(60);
  Sync();
  EXPECT_EQ(launcher_.launched.size(), 1u);
}

// Like a kubelet, the agent reports a container's termination message: the
// file the container wrote ($KUBETRAIN_TERMINATION_LOG, its
// /dev/termination-log), else, with terminationMessagePolicy
// FallbackToLogsOnError and a failure, the end of its log.
TEST_F(NodeAgentTest, TerminationMessagesAreTheFileElseTheLogsEnd) {
  Json pod = MakePod("w", "Never");
  pod["spec"]["containers"][0]["terminationMessagePolicy"] = "FallbackToLogsOnError";
  Add(pod);
  Json quiet = MakePod("q", "Never");
  quiet["spec"]["containers"][0]["terminationMessagePolicy"] = "FallbackToLogsOnError";
  Add(quiet);
  Json plain = MakePod("p", "Never");
  Add(plain);
  Sync();
  auto env_of = [&](const std::string& name) {
    std::map<std::string, std::string> env;
    for (const auto& [k, v] : launcher_.launched.at(launcher_.PidOf(name)).env) env[k] = v;
    return env;
  };
  const std::string file = env_of("w").at("KUBETRAIN_TERMINATION_LOG");
  ASSERT_FALSE(file.empty());
  EXPECT_NE(file, env_of("q").at("KUBETRAIN_TERMINATION_LOG"));
  std::ofstream(file) << "kubetrain: error: unknown model 'xyz'\n";
  // q writes nothing but logs; p logs too, without the fallback policy.
  for (const char* name : {"q", "p"}) {
    std::ofstream log(agent_->LogPath("team", name, "main"), std::ios::app);
    for (int i = 0; i < 100; ++i) log << "line " << i << "\n";
  }
  launcher_.Exit(launcher_.PidOf("w"), 1);
  launcher_.Exit(launcher_.PidOf("q"), 2);
  launcher_.Exit(launcher_.PidOf("p"), 2);
  Sync();
  EXPECT_EQ(ContainerStatus("w")["state"]["terminated"]["message"],
            "kubetrain: error: unknown model 'xyz'\n");
  const std::string tail = ContainerStatus("q")["state"]["terminated"]["message"];
  EXPECT_TRUE(tail.starts_with("line 20\n")) << tail;  // the last 80 lines
  EXPECT_TRUE(tail.ends_with("line 99\n")) << tail;
  EXPECT_FALSE(ContainerStatus("p")["state"]["terminated"].contains("message"));
}

TEST_F(NodeAgentTest, DeletionSendsSigtermThenSigkillAfterTheGracePeriod) {
  Add(MakePod("w", "Never"));
  Sync();
  const int pid = launcher_.PidOf("w");
  launcher_.ignore_term = true;
  api_.pods["team/w"]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  api_.pods["team/w"]["metadata"]["deletionGracePeriodSeconds"] = 5;
  Sync();
  EXPECT_THAT(launcher_.signals, ElementsAre(std::make_pair(pid, SIGTERM)));
  EXPECT_TRUE(api_.deleted.empty());
  clock_.AdvanceSeconds(4);
  Sync();
  EXPECT_EQ(launcher_.signals.size(), 1u);
  clock_.AdvanceSeconds(2);
  Sync();  // SIGKILL
  EXPECT_EQ(launcher_.signals.back(), std::make_pair(pid, SIGKILL));
  Sync();  // reaped: released and deleted for good
  EXPECT_THAT(api_.deleted, ElementsAre("team/w"));
  EXPECT_TRUE(network_.attached.empty());
  EXPECT_EQ(agent_->ActivePods(), 0);
}

// As the kubelet does: a deleted pod's terminal status, with how its
// container ended (a replica stopped by SIGTERM names its checkpoint there),
// is written before the pod is deleted, so watchers (the operator's
// status.lastCheckpoint) see it.
TEST_F(NodeAgentTest, ADeletedPodsTerminalStatusIsWrittenBeforeItGoes) {
  Add(MakePod("w", "Never"));
  Sync();
  const int pid = launcher_.PidOf("w");
  std::string file;
  for (const auto& [k, v] : launcher_.launched.at(pid).env) {
    if (k == "KUBETRAIN_TERMINATION_LOG") file = v;
  }
  ASSERT_FALSE(file.empty());
  std::ofstream(file) << "kubetrain: checkpoint step=7 path=/ckpt/ckpt-7\n";
  api_.pods["team/w"]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  api_.pods["team/w"]["metadata"]["deletionGracePeriodSeconds"] = 30;
  Sync();  // SIGTERM: it exits 143, is reaped, reported and deleted
  EXPECT_THAT(launcher_.signals, ElementsAre(std::make_pair(pid, SIGTERM)));
  EXPECT_THAT(api_.deleted, ElementsAre("team/w"));
  const Json& status = api_.final_status.at("team/w");
  EXPECT_EQ(status["phase"], "Failed");
  const Json& terminated = status["containerStatuses"][0]["state"]["terminated"];
  EXPECT_EQ(terminated["exitCode"], 143);
  EXPECT_EQ(terminated["message"], "kubetrain: checkpoint step=7 path=/ckpt/ckpt-7\n");
}

TEST_F(NodeAgentTest, APodForceDeletedIsKilledAtOnce) {
  Add(MakePod("w", "Never"));
  Sync();
  const int pid = launcher_.PidOf("w");
  api_.pods.erase("team/w");
  Sync();
  EXPECT_THAT(launcher_.signals, ElementsAre(std::make_pair(pid, SIGKILL)));
  EXPECT_EQ(agent_->ActivePods(), 0);
}

TEST_F(NodeAgentTest, HostsResolveEveryServiceToItsPod) {
  Json ps = MakePod("job-ps-0", "OnFailure");
  Json worker = MakePod("job-worker-0", "Never");
  Add(ps);
  Add(worker);
  for (const char* name : {"job-ps-0", "job-worker-0"}) {
    api_.services.push_back({{"metadata", {{"name", name}, {"namespace", "team"}}},
                             {"spec", {{"clusterIP", "None"}, {"selector", {{"name", name}}}}}});
  }
  Sync();  // started; IPs reported
  Sync();  // hosts written from the reported IPs
  const std::string hosts = network_.hosts["ns-uid-job-worker-0"];
  EXPECT_THAT(hosts, HasSubstr("10.0.0.2\tjob-ps-0.team.svc.cluster.local"));
  EXPECT_THAT(hosts, HasSubstr("10.0.0.3\tjob-worker-0.team.svc.cluster.local"));
}

// As the kubelet's status manager: conditions it does not own
// (DisruptionTarget, readiness gates) survive its status patches.
TEST_F(NodeAgentTest, ConditionsTheAgentDoesNotOwnAreKept) {
  Add(MakePod("w", "Never"));
  Sync();
  Json& conditions = api_.pods["team/w"]["status"]["conditions"];
  conditions.push_back(
      {{"type", "DisruptionTarget"}, {"status", "True"}, {"reason", "PreemptionByScheduler"}});
  Sync();
  launcher_.Exit(launcher_.PidOf("w"), 3);  // a change the agent reports
  Sync();
  EXPECT_EQ(Phase("w"), "Failed");
  bool kept = false;
  const Json pod = api_.Pod("team/w");
  for (const Json& c : pod["status"]["conditions"]) {
    kept = kept || (c.value("type", "") == "DisruptionTarget" &&
                    c.value("reason", "") == "PreemptionByScheduler");
  }
  EXPECT_TRUE(kept) << pod["status"].dump(2);
}

TEST_F(NodeAgentTest, StatusIsPatchedOnlyWhenItChanges) {
  Add(MakePod("w", "Never"));
  Sync();
  const int patches = api_.status_patches;
  Sync();
  Sync();
  EXPECT_EQ(api_.status_patches, patches);
}

TEST_F(NodeAgentTest, ShutdownStopsEveryPodAndReleasesNetworks) {
  Add(MakePod("a", "Always"));
  Add(MakePod("b", "Always"));
  Sync();
  launcher_.ignore_term = true;
  int sleeps = 0;
  agent_->Shutdown(absl::Seconds(2), [&](absl::Duration d) {
    ++sleeps;
    clock_.Advance(absl::ToInt64Nanoseconds(d));
  });
  EXPECT_GT(sleeps, 0);
  int terms = 0, kills = 0;
  for (const auto& [pid, sig] : launcher_.signals) {
    terms += sig == SIGTERM;
    kills += sig == SIGKILL;
  }
  EXPECT_EQ(terms, 2);
  EXPECT_EQ(kills, 2);
  EXPECT_TRUE(network_.attached.empty());
  EXPECT_EQ(agent_->ActivePods(), 0);
}

// The loopback fallback end to end through the agent: two pods of a job on
// 127.0.0.1, each told the other's loopback port, each with its own metrics
// port published in its prometheus.io/port annotation.
TEST(NodeAgentLoopbackTest, PodsOfAJobMeetOnTheirLoopbackPorts) {
  data::testing_util::TempDir dir;
  FakeApi api;
  FakePortAllocator ports;
  LoopbackNetwork network(ports);
  FakeLauncher launcher;
  FakeClock clock;
  kube::NullLogger logger;
  NodeAgentOptions options;
  options.node_name = "n1";
  options.entrypoint = "/opt/kubetrain";
  options.state_dir = dir.path();
  NodeAgent agent(api, network, launcher, clock, logger, options);
  const char kTfConfig[] =
      R"({"cluster":{"ps":["j-ps-0.team.svc:2222"],"worker":["j-worker-0.team.svc:2222"]},)";
  for (const std::string type : {"ps", "worker"}) {
    Json pod = MakePod("j-" + type + "-0", "OnFailure");
    pod["metadata"]["annotations"]["prometheus.io/port"] = "8090";
    pod["spec"]["containers"][0]["env"] = Json::array(
        {{{"name", "TF_CONFIG"},
          {"value", absl::StrCat(kTfConfig, R"("task":{"type":")", type, R"(","index":0}})")}},
         {{"name", "WHO"}, {"value", "$(TF_CONFIG)"}}});
    api.pods["team/" + kube::Name(pod)] = pod;
    api.services.push_back(Json{{"metadata", {{"namespace", "team"}, {"name", kube::Name(pod)}}},
                                {"spec", {{"selector", {{"name", kube::Name(pod)}}}}}});
  }
  ASSERT_TRUE(agent.SyncOnce().ok());
  const int ps_port = network.endpoints().allocated().at({"team", "j-ps-0", 2222});
  const int worker_port = network.endpoints().allocated().at({"team", "j-worker-0", 2222});
  const std::string cluster = absl::StrCat(R"({"cluster":{"ps":["127.0.0.1:)", ps_port,
                                           R"("],"worker":["127.0.0.1:)", worker_port, R"("]},)");
  std::set<std::string> metrics_ports;
  for (const std::string type : {"ps", "worker"}) {
    const std::string name = "j-" + type + "-0";
    const int pid =
        launcher.PidOf(absl::StrCat(cluster, R"("task":{"type":")", type, R"(","index":0}})"));
    ASSERT_NE(pid, 0) << name << " did not start with the rewritten TF_CONFIG";
    const LaunchSpec& spec = launcher.launched[pid];
    // No namespace to enter: the entrypoint runs as is, args expanded from
    // the rewritten environment.
    EXPECT_EQ(spec.argv.front(), "/opt/kubetrain");
    std::string metrics;
    for (const auto& [k, v] : spec.env) {
      if (k == "KUBETRAIN_METRICS_PORT") metrics = v;
    }
    ASSERT_FALSE(metrics.empty());
    metrics_ports.insert(metrics);
    const Json pod = api.Pod("team/" + name);
    EXPECT_EQ(pod["metadata"]["annotations"]["prometheus.io/port"], metrics);
    EXPECT_EQ(pod["status"]["podIP"], "127.0.0.1");
  }
  EXPECT_EQ(metrics_ports.size(), 2u);
  EXPECT_EQ(api.annotation_patches, 2);
  // Later passes do not patch again; nothing was written as /etc/hosts.
  ASSERT_TRUE(agent.SyncOnce().ok());
  EXPECT_EQ(api.annotation_patches, 2);
}

}  // namespace
}  // namespace kubetrain::node_agent
