#include "tools/node_agent/node_agent.h"

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/env_vars.h"
#include "api/labels.h"
#include "api/ports.h"
#include "operator/kube/object.h"
#include "tools/node_agent/container_env.h"
#include "tools/node_agent/container_log_index.h"
#include "tools/node_agent/hosts_file.h"

namespace kubetrain::node_agent {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;
constexpr char kLog[] = "node-agent";

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

int64_t GraceSeconds(const Json& pod) {
  const int64_t deletion = kube::IntAt(pod, {"metadata", "deletionGracePeriodSeconds"}, -1);
  if (deletion >= 0) return deletion;
  return kube::IntAt(pod, {"spec", "terminationGracePeriodSeconds"}, 30);
}

// Pods the default scheduler would place: no node yet, not ended, not being
// deleted, and not meant for another scheduler.
bool WantsScheduling(const Json& pod) {
  if (!kube::StringAt(pod, {"spec", "nodeName"}).empty()) return false;
  if (IsTerminal(pod) || kube::IsBeingDeleted(pod)) return false;
  const std::string scheduler = kube::StringAt(pod, {"spec", "schedulerName"});
  return scheduler.empty() || scheduler == "default-scheduler";
}

}  // namespace

NodeAgent::NodeAgent(NodeApi& api, PodNetwork& network, ProcessLauncher& launcher,
                     const Clock& clock, kube::Logger& logger, NodeAgentOptions options)
    : api_(api),
      network_(network),
      launcher_(launcher),
      clock_(clock),
      logger_(logger),
      options_(std::move(options)) {}

std::string NodeAgent::Now() const { return Rfc3339(options_.wall_now()); }

int64_t NodeAgent::Backoff(int restarts) const {
  absl::Duration d = options_.restart_backoff;
  for (int i = 1; i < restarts && d < options_.max_restart_backoff; ++i) d *= 2;
  return absl::ToInt64Nanoseconds(std::min(d, options_.max_restart_backoff));
}

std::string NodeAgent::LogPath(const std::string& ns, const std::string& pod,
                               const std::string& container) const {
  return absl::StrCat(options_.state_dir, "/logs/", ns, "/", pod, "/", container, ".log");
}

std::string NodeAgent::TerminationLogPath(const std::string& uid,
                                          const std::string& container) const {
  return absl::StrCat(options_.state_dir, "/work/", uid, "/", container, ".termination-log");
}

namespace {

// The kubelet's terminationMessagePolicy: the file's contents, else (with
// FallbackToLogsOnError and a failed container) the log's last 80 lines,
// at most 2 KiB; at most 4 KiB either way.
std::string TerminationMessage(const std::string& file, const std::string& log, int exit_code,
                               const std::string& policy) {
  auto tail = [](const std::string& path, size_t max_bytes) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) return std::string();
    const std::streamoff size = in.tellg();
    const std::streamoff from =
        std::max<std::streamoff>(0, size - static_cast<std::streamoff>(max_bytes));
    in.seekg(from);
    std::string s(static_cast<size_t>(size - from), '\0');
    in.read(s.data(), static_cast<std::streamsize>(s.size()));
    return s;
  };
  std::string message = tail(file, 4096);
  if (message.empty() && exit_code != 0 && policy == "FallbackToLogsOnError") {
    message = tail(log, 2048);
    size_t lines = 0, at = message.size();
    while (at > 0 && lines <= 80) {
      at = message.rfind('\n', at - 1);
      if (at == std::string::npos) {
        at = 0;
        break;
      }
      ++lines;
    }
    if (lines > 80) message = message.substr(at + 1);
  }
  return message;
}

}  // namespace

absl::Status NodeAgent::Register() {
  const Resources& c = options_.capacity;
  const Json resources{{"cpu", absl::StrCat(c.cpu_millis, "m")},
                       {"memory", absl::StrCat(c.memory_bytes)},
                       {"pods", absl::StrCat(c.pods)}};
  const std::string now = Now();
  Json node{{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata",
             {{"name", options_.node_name},
              {"labels",
               {{"kubernetes.io/hostname", options_.node_name},
                {"kubernetes.io/os", "linux"},
                {api::kLabelNodeAgent, "true"}}}}},
            {"status",
             {{"capacity", resources},
              {"allocatable", resources},
              {"addresses", Json::array({{{"type", "InternalIP"}, {"address", options_.host_ip}},
                                         // kube-apiserver dials a node's kubelet at the
                                         // first address of its preferred types, Hostname
                                         // first: the host's address, as the node name
                                         // resolves nowhere.
                                         {{"type", "Hostname"}, {"address", options_.host_ip}}})},
              {"daemonEndpoints", {{"kubeletEndpoint", {{"Port", options_.kubelet_port}}}}},
              {"conditions", Json::array({{{"type", "Ready"},
                                           {"status", "True"},
                                           {"reason", "KubeletReady"},
                                           {"message", "kubetrain-node-agent is ready"},
                                           {"lastHeartbeatTime", now},
                                           {"lastTransitionTime", now}}})},
              {"nodeInfo",
               {{"kubeletVersion", "kubetrain-node-agent"},
                {"containerRuntimeVersion", "process://kubetrain-node-agent"},
                {"operatingSystem", "linux"},
                {"architecture", "amd64"}}}}}};
  if (absl::Status s = api_.RegisterNode(node); !s.ok()) return s;
  // Ready now: off with the lifecycle taints (the API server's NodeTaint
  // admission put not-ready on the new Node; a monitor may have put
  // unreachable on it while this agent was away), as the node lifecycle
  // controller does for a Ready node.
  absl::StatusOr<Json> current = api_.GetNode(options_.node_name);
  if (!current.ok()) return current.status();
  if (!current->contains("spec") || !(*current)["spec"].is_object() ||
      !(*current)["spec"].contains("taints")) {
    return absl::OkStatus();
  }
  const Json& taints = (*current)["spec"]["taints"];
  if (!taints.is_array()) return absl::OkStatus();
  Json kept = Json::array();
  for (const Json& t : taints) {
    const std::string key = kube::StringAt(t, {"key"});
    if (key != kTaintNotReady && key != kTaintUnreachable) kept.push_back(t);
  }
  if (kept.size() == taints.size()) return absl::OkStatus();
  return api_.PatchNodeSpec(options_.node_name,
                            Json{{"taints", kept.empty() ? Json(nullptr) : kept}});
}

absl::Status NodeAgent::Heartbeat() {
  const int64_t now = clock_.NowNanos();
  if (lease_renewed_at_ &&
      now - *lease_renewed_at_ < absl::ToInt64Nanoseconds(options_.node_lease_duration / 4)) {
    return absl::OkStatus();
  }
  const Json lease{
      {"apiVersion", "coordination.k8s.io/v1"},
      {"kind", "Lease"},
      {"metadata", {{"name", options_.node_name}, {"namespace", kNodeLeaseNamespace}}},
      {"spec",
       {{"holderIdentity", options_.node_name},
        {"leaseDurationSeconds", absl::ToInt64Seconds(options_.node_lease_duration)},
        {"renewTime", kube::FormatMicroTime(absl::ToUnixMicros(options_.wall_now()))}}}};
  absl::Status s = api_.RenewLease(lease);
  if (s.ok()) lease_renewed_at_ = now;
  return s;
}

void NodeAgent::Schedule(std::vector<Json>& pods, absl::Status& first_error) {
  std::vector<Json*> pending;
  for (Json& pod : pods) {
    if (WantsScheduling(pod)) pending.push_back(&pod);
  }
  std::sort(pending.begin(), pending.end(), [](const Json* a, const Json* b) {
    return std::make_pair(kube::StringAt(*a, {"metadata", "creationTimestamp"}), kube::Name(*a)) <
           std::make_pair(kube::StringAt(*b, {"metadata", "creationTimestamp"}), kube::Name(*b));
  });
  Resources used = UsedOnNode(pods, options_.node_name);
  for (Json* pod : pending) {
    const std::string ns = kube::Namespace(*pod), name = kube::Name(*pod), uid = kube::Uid(*pod);
    // Not for this node (its selector, taints, cordon): another may take it.
    if (!PlacementFailure(*pod, node_).empty()) continue;
    absl::StatusOr<Resources> request = PodRequests(*pod);
    std::string why = request.ok() ? FitFailure(options_.capacity, used, *request)
                                   : std::string(request.status().message());
    if (why.empty()) {
      absl::Status s = api_.Bind(ns, name, uid, options_.node_name);
      if (s.ok()) {
        logger_.Info(kLog, absl::StrCat("bound ", ns, "/", name, " to ", options_.node_name));
        (*pod)["spec"]["nodeName"] = options_.node_name;
        used.cpu_millis += request->cpu_millis;
        used.memory_bytes += request->memory_bytes;
        used.pods += request->pods;
        unschedulable_.erase(uid);
        continue;
      }
      if (first_error.ok()) first_error = s;
      logger_.Warning(kLog, absl::StrCat("binding ", ns, "/", name, ": ", s.message()));
      continue;
    }
    const std::string message = absl::StrCat("0/1 nodes are available: ", why, ".");
    if (unschedulable_[uid] == message) continue;
    logger_.Info(kLog, absl::StrCat(ns, "/", name, " does not fit: ", why));
    Json status{{"conditions", Json::array({{{"type", "PodScheduled"},
                                             {"status", "False"},
                                             {"reason", "Unschedulable"},
                                             {"message", message},
                                             {"lastTransitionTime", Now()}}})}};
    if (absl::Status s = api_.PatchPodStatus(ns, name, status); s.ok()) {
      unschedulable_[uid] = message;
    } else if (first_error.ok()) {
      first_error = s;
    }
  }
}

void NodeAgent::StartPod(const Json& pod) {
  PodRun run;
  run.ns = kube::Namespace(pod);
  run.name = kube::Name(pod);
  run.uid = kube::Uid(pod);
  run.pod = pod;
  run.restart_policy = kube::StringAt(pod, {"spec", "restartPolicy"});
  if (run.restart_policy.empty()) run.restart_policy = "Always";
  run.start_time = Now();
  if (pod.contains("spec") && pod["spec"].contains("containers") &&
      pod["spec"]["containers"].is_array()) {
    for (const Json& c : pod["spec"]["containers"]) {
      ContainerRun cr;
      cr.name = kube::StringAt(c, {"name"});
      cr.image = kube::StringAt(c, {"image"});
      run.containers.push_back(cr);
    }
  }
  const std::string key = absl::StrCat(run.ns, "/", run.name);
  // A new pod of this name starts with fresh logs.
  std::error_code ec;
  fs::remove_all(fs::path(options_.state_dir) / "logs" / run.ns / run.name, ec);
  fs::create_directories(fs::path(options_.state_dir) / "logs" / run.ns / run.name, ec);
  fs::create_directories(fs::path(options_.state_dir) / "work" / run.uid, ec);
  for (const ContainerRun& c : run.containers) {
    if (absl::Status s = CreateRunIndex(LogPath(run.ns, run.name, c.name)); !s.ok()) {
      logger_.Warning(kLog, absl::StrCat("log index of ", key, ": ", s.message()));
    }
  }
  absl::StatusOr<PodAttachment> net = network_.Attach(key, run.uid);
  if (!net.ok()) {
    logger_.Error(kLog,
                  absl::StrCat("cannot attach a network to ", key, ": ", net.status().message()));
    run.attach_failed = true;
    for (ContainerRun& c : run.containers) {
      c.waiting_reason = "NetworkNotReady";
      c.waiting_message = std::string(net.status().message());
      c.restart_at = clock_.NowNanos() + Backoff(1);
    }
  } else {
    run.net = *net;
    run.ip = net->ip;
    logger_.Info(kLog, absl::StrCat("starting ", key, " at ", run.ip,
                                    net->netns.empty() ? "" : " in netns " + net->netns));
    PublishMetricsPort(run);
    for (size_t i = 0; i < run.containers.size(); ++i) StartContainer(run, i);
  }
  runs_.emplace(run.uid, std::move(run));
}

void NodeAgent::StartContainer(PodRun& run, size_t i) {
  ContainerRun& c = run.containers[i];
  const Json& spec = run.pod["spec"]["containers"][i];
  KeyLookup lookup = [this](const std::string& kind, const std::string& ns, const std::string& name,
                            const std::string& key) { return api_.ReadKey(kind, ns, name, key); };
  PodRuntimeFields fields{run.ip, options_.host_ip, options_.node_name};
  absl::StatusOr<api::EnvList> env = ContainerEnvironment(run.pod, spec, fields, lookup);
  if (env.ok()) env = network_.RewriteEnvironment(*run.net, run.ns, service_names_, *env);
  absl::StatusOr<std::vector<std::string>> argv =
      env.ok() ? ContainerArgv(spec, *env, options_.entrypoint)
               : absl::StatusOr<std::vector<std::string>>(env.status());
  if (!argv.ok()) {
    c.waiting_reason = "CreateContainerConfigError";
    c.waiting_message = std::string(argv.status().message());
    c.restart_at = clock_.NowNanos() + Backoff(1);
    logger_.Warning(
        kLog, absl::StrCat(run.ns, "/", run.name, " container ", c.name, ": ", c.waiting_message));
    return;
  }
  LaunchSpec launch;
  launch.argv = run.net->exec_prefix;
  launch.argv.insert(launch.argv.end(), argv->begin(), argv->end());
  launch.env = options_.base_env;
  launch.env.emplace_back("HOSTNAME", run.name);
  // Every run starts with an empty termination message.
  const std::string termination_log = TerminationLogPath(run.uid, c.name);
  std::ofstream(termination_log, std::ios::trunc).close();
  launch.env.emplace_back(api::kEnvTerminationLog, termination_log);
  launch.env.insert(launch.env.end(), env->begin(), env->end());
  launch.log_path = LogPath(run.ns, run.name, c.name);
  launch.working_dir = kube::StringAt(spec, {"workingDir"});
  if (launch.working_dir.empty()) {
    launch.working_dir = (fs::path(options_.state_dir) / "work" / run.uid).string();
  }
  if (absl::Status s = RecordRunStart(launch.log_path); !s.ok()) {
    logger_.Warning(kLog, absl::StrCat("log index of ", run.ns, "/", run.name, ": ", s.message()));
  }
  absl::StatusOr<int> pid = launcher_.Launch(launch);
  if (!pid.ok()) {
    RecordEnd(run, c, 128);
    c.waiting_reason = "RunContainerError";
    c.waiting_message = std::string(pid.status().message());
    c.restart_at = clock_.NowNanos() + Backoff(c.restart_count + 1);
    logger_.Warning(
        kLog, absl::StrCat(run.ns, "/", run.name, " container ", c.name, ": ", c.waiting_message));
    return;
  }
  c.pid = *pid;
  c.started_once = true;
  c.started_at = Now();
  c.waiting_reason.clear();
  c.waiting_message.clear();
  logger_.Info(kLog, absl::StrCat(run.ns, "/", run.name, " container ", c.name, " started, pid ",
                                  c.pid, ": ", absl::StrJoin(*argv, " ")));
  WriteStateFile(run);
}

void NodeAgent::ReapAndRestart(PodRun& run) {
  const int64_t now = clock_.NowNanos();
  for (size_t i = 0; i < run.containers.size(); ++i) {
    ContainerRun& c = run.containers[i];
    if (c.pid != 0) {
      std::optional<int> code = launcher_.PollExit(c.pid);
      if (!code) continue;
      c.pid = 0;
      c.exit_code = *code;
      c.finished_at = Now();
      RecordEnd(run, c, *code);
      Json terminated{{"exitCode", *code},
                      {"reason", *code == 0 ? "Completed" : "Error"},
                      {"startedAt", c.started_at},
                      {"finishedAt", c.finished_at},
                      {"containerID", absl::StrCat("process://", run.uid, "/", c.name)}};
      if (*code > 128) terminated["signal"] = *code - 128;
      const std::string message = TerminationMessage(
          TerminationLogPath(run.uid, c.name), LogPath(run.ns, run.name, c.name), *code,
          kube::StringAt(run.pod["spec"]["containers"][i], {"terminationMessagePolicy"}));
      if (!message.empty()) terminated["message"] = message;
      c.last_state = {{"terminated", terminated}};
      const bool restart = !run.terminating && (run.restart_policy == "Always" ||
                                                (run.restart_policy == "OnFailure" && *code != 0));
      logger_.Info(kLog, absl::StrCat(run.ns, "/", run.name, " container ", c.name, " exited with ",
                                      *code, restart ? ", restarting" : ""));
      if (restart) {
        ++c.restart_count;
        c.restart_at = now + Backoff(c.restart_count);
        c.waiting_reason = "CrashLoopBackOff";
        c.waiting_message = absl::StrCat("back-off restarting the container, last exit ", *code);
      } else {
        c.done = true;
      }
      continue;
    }
    if (c.done || run.terminating || !run.net) continue;
    if (now >= c.restart_at) StartContainer(run, i);
  }
  // A network that failed to attach is retried after its back-off.
  if (run.attach_failed && !run.terminating && !run.containers.empty() &&
      now >= run.containers[0].restart_at) {
    absl::StatusOr<PodAttachment> net = network_.Attach(run.ns + "/" + run.name, run.uid);
    if (net.ok()) {
      run.attach_failed = false;
      run.net = *net;
      run.ip = net->ip;
      PublishMetricsPort(run);
      for (size_t i = 0; i < run.containers.size(); ++i) StartContainer(run, i);
    } else {
      for (ContainerRun& c : run.containers) c.restart_at = now + Backoff(2);
    }
  }
}

void NodeAgent::RecordEnd(const PodRun& run, const ContainerRun& c, int exit_code) {
  if (absl::Status s = RecordRunEnd(LogPath(run.ns, run.name, c.name), exit_code); !s.ok()) {
    logger_.Warning(kLog, absl::StrCat("log index of ", run.ns, "/", run.name, ": ", s.message()));
  }
}

void NodeAgent::PublishMetricsPort(const PodRun& run) {
  if (run.net->metrics_port == 0) return;
  const std::string port = absl::StrCat(run.net->metrics_port);
  if (kube::Annotation(run.pod, api::kPrometheusPortAnnotation) == port) return;
  const Json annotations{{api::kPrometheusPortAnnotation, port}};
  if (absl::Status s = api_.PatchPodAnnotations(run.ns, run.name, annotations); !s.ok()) {
    logger_.Warning(kLog, absl::StrCat("annotating ", run.ns, "/", run.name, " with metrics port ",
                                       port, ": ", s.message()));
    return;
  }
  logger_.Info(kLog, absl::StrCat(run.ns, "/", run.name, " serves metrics on 127.0.0.1:", port));
}

bool NodeAgent::AnyRunning(const PodRun& run) const {
  for (const ContainerRun& c : run.containers) {
    if (c.pid != 0) return true;
  }
  return false;
}

void NodeAgent::BeginTermination(PodRun& run) {
  if (run.terminating) return;
  run.terminating = true;
  const int64_t grace = GraceSeconds(run.pod);
  run.kill_at = clock_.NowNanos() + grace * 1000000000LL;
  logger_.Info(kLog, absl::StrCat("stopping ", run.ns, "/", run.name, " (grace ", grace, " s)"));
  for (ContainerRun& c : run.containers) {
    if (c.pid != 0) launcher_.SignalGroup(c.pid, grace == 0 ? SIGKILL : SIGTERM);
  }
}

void NodeAgent::ReleaseNetwork(PodRun& run) {
  if (!run.net) return;
  if (absl::Status s = network_.Detach(*run.net); !s.ok()) {
    logger_.Warning(
        kLog, absl::StrCat("releasing the network of ", run.ns, "/", run.name, ": ", s.message()));
  }
  run.net.reset();
}

std::string NodeAgent::Phase(const PodRun& run) const {
  bool all_done = !run.containers.empty();
  bool all_zero = true;
  bool any_started = false;
  for (const ContainerRun& c : run.containers) {
    if (!c.done) all_done = false;
    if (c.exit_code != 0) all_zero = false;
    if (c.started_once) any_started = true;
  }
  if (all_done) return all_zero ? "Succeeded" : "Failed";
  return any_started ? "Running" : "Pending";
}

Json NodeAgent::BuildStatus(PodRun& run) {
  const std::string phase = Phase(run);
  bool all_running = !run.containers.empty();
  Json statuses = Json::array();
  for (const ContainerRun& c : run.containers) {
    Json state;
    if (c.pid != 0) {
      state = {{"running", {{"startedAt", c.started_at}}}};
    } else if (c.done) {
      state = c.last_state;
    } else {
      state = {{"waiting", {{"reason", c.waiting_reason}}}};
      if (!c.waiting_message.empty()) state["waiting"]["message"] = c.waiting_message;
    }
    if (c.pid == 0) all_running = false;
    Json s{{"name", c.name},        {"image", c.image},
           {"imageID", ""},         {"ready", c.pid != 0},
           {"started", c.pid != 0}, {"restartCount", c.restart_count},
           {"state", state},        {"lastState", c.done ? Json::object() : c.last_state}};
    if (c.started_once) s["containerID"] = absl::StrCat("process://", run.uid, "/", c.name);
    statuses.push_back(s);
  }
  const std::string ready = all_running && phase == "Running" ? "True" : "False";
  const std::string now = Now();
  Json conditions = Json::array();
  for (const auto& [type, value] :
       std::vector<std::pair<std::string, std::string>>{{"Initialized", "True"},
                                                        {"Ready", ready},
                                                        {"ContainersReady", ready},
                                                        {"PodScheduled", "True"}}) {
    auto it = run.conditions.find(type);
    if (it == run.conditions.end() || it->second.first != value) {
      run.conditions[type] = {value, now};
    }
    Json cond{{"type", type},
              {"status", value},
              {"lastProbeTime", nullptr},
              {"lastTransitionTime", run.conditions[type].second}};
    if (value == "False") {
      cond["reason"] =
          phase == "Running" || phase == "Pending" ? "ContainersNotReady" : "PodCompleted";
    }
    conditions.push_back(cond);
  }
  // Conditions the kubelet does not own (DisruptionTarget, readiness
  // gates) are kept as the API has them, as the kubelet's status manager
  // does: a merge patch replaces the whole list.
  if (run.pod.contains("status") && run.pod["status"].is_object() &&
      run.pod["status"].contains("conditions") && run.pod["status"]["conditions"].is_array()) {
    for (const Json& c : run.pod["status"]["conditions"]) {
      const std::string type = kube::StringAt(c, {"type"});
      if (type == "Initialized" || type == "Ready" || type == "ContainersReady" ||
          type == "PodScheduled") {
        continue;
      }
      conditions.push_back(c);
    }
  }
  Json status{{"phase", phase},
              {"hostIP", options_.host_ip},
              {"startTime", run.start_time},
              {"conditions", conditions},
              {"containerStatuses", statuses}};
  if (!run.ip.empty()) {
    status["podIP"] = run.ip;
    status["podIPs"] = Json::array({{{"ip", run.ip}}});
  }
  return status;
}

void NodeAgent::WriteStateFile(const PodRun& run) const {
  Json pids = Json::object();
  Json logs = Json::object();
  for (const ContainerRun& c : run.containers) {
    pids[c.name] = c.pid;
    logs[c.name] = LogPath(run.ns, run.name, c.name);
  }
  Json state{{"namespace", run.ns}, {"name", run.name}, {"uid", run.uid},
             {"ip", run.ip},        {"pids", pids},     {"logs", logs}};
  if (run.net) {
    state["netns"] = run.net->netns;
    state["hostLink"] = run.net->host_link;
  }
  std::error_code ec;
  const fs::path dir = fs::path(options_.state_dir) / "pods";
  fs::create_directories(dir, ec);
  const fs::path path = dir / absl::StrCat(run.ns, "_", run.name, ".json");
  const fs::path tmp = dir / absl::StrCat(".", run.ns, "_", run.name, ".json.tmp");
  {
    std::ofstream out(tmp);
    out << state.dump(2) << "\n";
  }
  fs::rename(tmp, path, ec);
}

void NodeAgent::RemoveStateFile(const PodRun& run) const {
  std::error_code ec;
  fs::remove(fs::path(options_.state_dir) / "pods" / absl::StrCat(run.ns, "_", run.name, ".json"),
             ec);
  fs::remove_all(fs::path(options_.state_dir) / "work" / run.uid, ec);
}

absl::Status NodeAgent::SyncOnce() {
  absl::Status first_error;
  absl::StatusOr<std::vector<Json>> listed = api_.ListPods();
  if (!listed.ok()) return listed.status();
  std::vector<Json> pods = std::move(*listed);
  absl::StatusOr<std::vector<Json>> services = api_.ListServices();
  if (!services.ok()) {
    first_error = services.status();
  } else {
    service_names_.clear();
    for (const Json& svc : *services) service_names_.emplace(kube::Namespace(svc), kube::Name(svc));
  }

  // This node's labels, taints and cordon: read afresh when a pod waits to be placed (so a
  // taint or cordon written before the pod was created is always seen, as by the scheduler),
  // else at most once a second.
  const int64_t read_at = clock_.NowNanos();
  const bool placing = std::any_of(pods.begin(), pods.end(), [](const Json& pod) {
    return kube::StringAt(pod, {"spec", "nodeName"}).empty() && !kube::IsBeingDeleted(pod);
  });
  if (placing || !node_read_at_ ||
      read_at - *node_read_at_ >= absl::ToInt64Nanoseconds(absl::Seconds(1))) {
    absl::StatusOr<Json> node = api_.GetNode(options_.node_name);
    if (node.ok()) {
      node_ = *std::move(node);
      node_read_at_ = read_at;
    } else if (first_error.ok() && !absl::IsNotFound(node.status())) {
      first_error = node.status();
    }
  }
  Schedule(pods, first_error);

  std::map<std::string, const Json*> mine;  // uid -> pod bound here
  for (const Json& pod : pods) {
    if (kube::StringAt(pod, {"spec", "nodeName"}) == options_.node_name) {
      mine[kube::Uid(pod)] = &pod;
    }
  }
  // Start what is new; note deletions.
  for (const auto& [uid, pod] : mine) {
    auto it = runs_.find(uid);
    if (it == runs_.end()) {
      if (kube::IsBeingDeleted(*pod)) {
        // Nothing of it runs here: finish the deletion.
        absl::Status s = api_.DeletePod(kube::Namespace(*pod), kube::Name(*pod), uid);
        if (!s.ok() && first_error.ok()) first_error = s;
        continue;
      }
      if (IsTerminal(*pod)) continue;  // ended before this agent started
      StartPod(*pod);
      continue;
    }
    it->second.pod = *pod;
    if (kube::IsBeingDeleted(*pod)) BeginTermination(it->second);
  }
  // Pods gone from the API (force-deleted): kill at once.
  for (auto it = runs_.begin(); it != runs_.end();) {
    PodRun& run = it->second;
    if (mine.count(it->first)) {
      ++it;
      continue;
    }
    logger_.Info(kLog, absl::StrCat(run.ns, "/", run.name, " is gone from the API; killing it"));
    for (ContainerRun& c : run.containers) {
      if (c.pid == 0) continue;
      launcher_.SignalGroup(c.pid, SIGKILL);
      orphans_.push_back(c.pid);
      RecordEnd(run, c, 128 + SIGKILL);
    }
    ReleaseNetwork(run);
    RemoveStateFile(run);
    it = runs_.erase(it);
  }

  orphans_.erase(std::remove_if(orphans_.begin(), orphans_.end(),
                                [this](int pid) { return launcher_.PollExit(pid).has_value(); }),
                 orphans_.end());
  const int64_t now = clock_.NowNanos();
  for (auto it = runs_.begin(); it != runs_.end();) {
    PodRun& run = it->second;
    ReapAndRestart(run);
    if (run.terminating) {
      if (AnyRunning(run) && !run.killed && now >= run.kill_at) {
        run.killed = true;
        logger_.Info(kLog,
                     absl::StrCat(run.ns, "/", run.name, " grace period over; sending SIGKILL"));
        for (ContainerRun& c : run.containers) {
          if (c.pid != 0) launcher_.SignalGroup(c.pid, SIGKILL);
        }
      }
      if (!AnyRunning(run)) {
        ReleaseNetwork(run);
        // The terminal status before the deletion, as the kubelet writes it
        // (since Kubernetes 1.27): watchers see how the containers ended,
        // their termination messages included (a stopped replica's
        // checkpoint, the operator's status.lastCheckpoint).
        Json status = BuildStatus(run);
        if (status != run.last_status) {
          if (absl::Status p = api_.PatchPodStatus(run.ns, run.name, status); p.ok()) {
            run.last_status = std::move(status);
          } else {
            logger_.Warning(kLog,
                            absl::StrCat("status of ", run.ns, "/", run.name, ": ", p.message()));
          }
        }
        absl::Status s = api_.DeletePod(run.ns, run.name, run.uid);
        if (s.ok()) {
          logger_.Info(kLog, absl::StrCat(run.ns, "/", run.name, " stopped and deleted"));
          RemoveStateFile(run);
          it = runs_.erase(it);
          continue;
        }
        if (first_error.ok()) first_error = s;
      }
      ++it;
      continue;
    }
    const std::string phase = Phase(run);
    if ((phase == "Succeeded" || phase == "Failed") && run.net) {
      logger_.Info(kLog, absl::StrCat(run.ns, "/", run.name, " ", phase));
      ReleaseNetwork(run);
    }
    ++it;
  }

  // /etc/hosts of each pod with a network.
  if (services.ok()) {
    for (auto& [uid, run] : runs_) {
      if (!run.net) continue;
      std::string hosts = HostsFile(run.ns, run.name, run.ip, *services, pods);
      if (hosts == run.hosts) continue;
      if (absl::Status s = network_.WriteHosts(*run.net, hosts); s.ok()) {
        run.hosts = std::move(hosts);
      } else {
        logger_.Warning(kLog, absl::StrCat("hosts of ", run.ns, "/", run.name, ": ", s.message()));
      }
    }
  }

  // Status, when it changed.
  for (auto& [uid, run] : runs_) {
    if (run.terminating) continue;
    Json status = BuildStatus(run);
    if (status == run.last_status) continue;
    absl::Status s = api_.PatchPodStatus(run.ns, run.name, status);
    if (s.ok()) {
      run.last_status = std::move(status);
    } else {
      logger_.Warning(kLog, absl::StrCat("status of ", run.ns, "/", run.name, ": ", s.message()));
      if (first_error.ok()) first_error = s;
    }
  }
  return first_error;
}

void NodeAgent::Shutdown(absl::Duration grace, const std::function<void(absl::Duration)>& sleep) {
  for (auto& [uid, run] : runs_) {
    run.terminating = true;
    for (ContainerRun& c : run.containers) {
      if (c.pid != 0) launcher_.SignalGroup(c.pid, SIGTERM);
    }
  }
  const int64_t deadline = clock_.NowNanos() + absl::ToInt64Nanoseconds(grace);
  bool killed = false;
  for (;;) {
    bool any = false;
    for (auto& [uid, run] : runs_) {
      for (ContainerRun& c : run.containers) {
        if (c.pid == 0) continue;
        if (std::optional<int> code = launcher_.PollExit(c.pid)) {
          c.pid = 0;
          RecordEnd(run, c, *code);
        } else {
          any = true;
        }
      }
    }
    orphans_.erase(std::remove_if(orphans_.begin(), orphans_.end(),
                                  [this](int pid) { return launcher_.PollExit(pid).has_value(); }),
                   orphans_.end());
    if (!orphans_.empty()) any = true;
    if (!any) break;
    if (!killed && clock_.NowNanos() >= deadline) {
      killed = true;
      logger_.Info(kLog, "shutdown grace period over; sending SIGKILL");
      for (auto& [uid, run] : runs_) {
        for (ContainerRun& c : run.containers) {
          if (c.pid != 0) launcher_.SignalGroup(c.pid, SIGKILL);
        }
      }
      for (int pid : orphans_) launcher_.SignalGroup(pid, SIGKILL);
    }
    sleep(absl::Milliseconds(20));
  }
  for (auto& [uid, run] : runs_) {
    ReleaseNetwork(run);
    RemoveStateFile(run);
  }
  logger_.Info(kLog, absl::StrCat("stopped ", runs_.size(), " pods"));
  runs_.clear();
}

int NodeAgent::ActivePods() const {
  int n = 0;
  for (const auto& [uid, run] : runs_) {
    if (AnyRunning(run) || run.net) ++n;
  }
  return n;
}

}  // namespace kubetrain::node_agent
