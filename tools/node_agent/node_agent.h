// NodeAgent: the kubelet's part for tests and local demos, on one machine.
//
// Each SyncOnce() pass is level-triggered: it lists pods and Services, then
//  1. schedules: binds each pending pod without spec.nodeName to this node
//     when its nodeSelector, this node's taints and cordon allow it
//     (pod_fit.h; else leaves it to another node) and its requests fit next
//     to the pods already there (else marks it PodScheduled=False,
//     Unschedulable, saying what is short);
//  2. starts each bound pod it does not run yet: attaches its network (a
//     namespace and address, PodNetwork), computes each container's
//     environment (values, Secret/ConfigMap keys, fieldRefs, $(VAR)) and
//     argv, and launches it as a process group whose output goes to
//     <state>/logs/<ns>/<pod>/<container>.log, recording where each run
//     starts and ends in it (container_log_index.h);
//  3. reaps exits and restarts containers in place per restartPolicy
//     (Always; OnFailure on a non-zero exit) after a doubling back-off,
//     counting restarts; a pod whose containers are all done is Succeeded
//     (every exit 0) or Failed, and its network is released;
//  4. stops deleted pods: SIGTERM to every group, SIGKILL once the grace
//     period has passed, then deletes the pod for good (grace 0); a pod
//     that vanished from the API is killed at once;
//  5. writes each pod's /etc/hosts so every Service name resolves to its
//     pod's address (on the loopback network, PodNetwork rewrites each
//     container's environment instead, and the agent points the pod's
//     prometheus.io/port annotation at the metrics port it was given);
//  6. reports phase, podIP, conditions, container states, restart counts
//     and exit codes through the status subresource when they changed.
// It also writes <state>/pods/<ns>_<pod>.json (uid, ip, netns, host link,
// pids, log paths) for tests and people that need to find a pod's processes.
//
// Not thread-safe: one thread calls Register, SyncOnce and Shutdown (and it
// must live as long as the agent: children die with the thread that forked
// them).
#ifndef KUBETRAIN_TOOLS_NODE_AGENT_NODE_AGENT_H_
#define KUBETRAIN_TOOLS_NODE_AGENT_NODE_AGENT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "api/cluster_spec.h"
#include "base/clock.h"
#include "operator/kube/logger.h"
#include "tools/node_agent/node_api.h"
#include "tools/node_agent/pod_fit.h"
#include "tools/node_agent/pod_network.h"
#include "tools/node_agent/process_launcher.h"

namespace kubetrain::node_agent {

struct NodeAgentOptions {
  std::string node_name = "kubetrain-node";
  Resources capacity{8000, int64_t{16} << 30, 110};
  std::string host_ip = "127.0.0.1";
  // The port of this node's kubelet endpoint (operator/kube/https_server.h), published as
  // status.daemonEndpoints.kubeletEndpoint.Port; 0: none.
  int kubelet_port = 0;
  // What a container without `command` runs (the image's entrypoint).
  std::string entrypoint;
  std::string state_dir = "/tmp/kubetrain-node-agent";
  // Every container's environment starts with these (the image's ENV).
  // Service names resolve through the pod's /etc/hosts, which gRPC's default
  // c-ares resolver does not read: the native resolver (getaddrinfo) does.
  api::EnvList base_env = {{"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
                           {"GRPC_DNS_RESOLVER", "native"}};
  absl::Duration restart_backoff = absl::Seconds(1);  // doubles per restart
  absl::Duration max_restart_backoff = absl::Seconds(10);
  // The node's Lease (kube-node-lease/<node_name>): its leaseDurationSeconds,
  // renewed every quarter of it, as the kubelet does (40 s, every 10 s).
  absl::Duration node_lease_duration = absl::Seconds(40);
  // Wall time for status timestamps.
  std::function<absl::Time()> wall_now = [] { return absl::Now(); };
};

class NodeAgent {
 public:
  // Borrows every reference; they must outlive the agent.
  NodeAgent(NodeApi& api, PodNetwork& network, ProcessLauncher& launcher, const Clock& clock,
            kube::Logger& logger, NodeAgentOptions options);
  NodeAgent(const NodeAgent&) = delete;
  NodeAgent& operator=(const NodeAgent&) = delete;

  // Creates or refreshes the Node object (capacity, Ready, address).
  absl::Status Register();
  // Renews the node's Lease when a quarter of its duration has passed since
  // the last renewal (at once the first time). The node lifecycle
  // controller marks the Node's Ready Unknown once renewals stop.
  absl::Status Heartbeat();
  // One pass (see above). Returns the first API error; the pass still does
  // what it can without the failed call.
  absl::Status SyncOnce();
  // SIGTERM to every pod's processes, SIGKILL after `grace`, networks
  // released. `sleep` waits between checks.
  void Shutdown(absl::Duration grace, const std::function<void(absl::Duration)>& sleep);

  // Pods with processes or a network, for tests and logs.
  int ActivePods() const;
  std::string LogPath(const std::string& ns, const std::string& pod,
                      const std::string& container) const;
  // The file a container's termination message is read from when it exits
  // ($KUBETRAIN_TERMINATION_LOG in its environment, as /dev/termination-log
  // is in a pod).
  std::string TerminationLogPath(const std::string& uid, const std::string& container) const;

 private:
  struct ContainerRun {
    std::string name;
    std::string image;
    int pid = 0;  // 0: not running
    int restart_count = 0;
    bool started_once = false;
    bool done = false;  // ended and will not restart
    int exit_code = 0;  // of the last run
    std::string started_at, finished_at;
    nlohmann::json last_state = nlohmann::json::object();
    int64_t restart_at = 0;  // clock nanos; 0 = now
    std::string waiting_reason = "ContainerCreating", waiting_message;
  };
  struct PodRun {
    std::string ns, name, uid;
    nlohmann::json pod;
    std::string restart_policy;
    std::optional<PodAttachment> net;
    bool attach_failed = false;  // retried after a back-off
    std::string ip;
    std::vector<ContainerRun> containers;
    std::string start_time;
    bool terminating = false;
    int64_t kill_at = 0;
    bool killed = false;
    std::string hosts;  // as last written
    nlohmann::json last_status;
    std::map<std::string, std::pair<std::string, std::string>> conditions;  // type -> status, time
  };

  void Schedule(std::vector<nlohmann::json>& pods, absl::Status& first_error);
  void StartPod(const nlohmann::json& pod);
  // Starts container `i` of `run`, or records why it could not.
  void StartContainer(PodRun& run, size_t i);
  void ReapAndRestart(PodRun& run);
  // Records the end of container `c`'s run in its log's run index.
  void RecordEnd(const PodRun& run, const ContainerRun& c, int exit_code);
  void BeginTermination(PodRun& run);
  bool AnyRunning(const PodRun& run) const;
  void ReleaseNetwork(PodRun& run);
  // Points the pod's prometheus.io/port annotation at the port its network
  // gave its metrics server, when that is not the annotated one.
  void PublishMetricsPort(const PodRun& run);
  std::string Phase(const PodRun& run) const;
  nlohmann::json BuildStatus(PodRun& run);
  void WriteStateFile(const PodRun& run) const;
  void RemoveStateFile(const PodRun& run) const;
  std::string Now() const;
  int64_t Backoff(int restarts) const;

  NodeApi& api_;
  PodNetwork& network_;
  ProcessLauncher& launcher_;
  const Clock& clock_;
  kube::Logger& logger_;
  const NodeAgentOptions options_;
  std::map<std::string, PodRun> runs_;                           // by uid
  std::map<std::string, std::string> unschedulable_;             // uid -> message sent
  std::set<std::pair<std::string, std::string>> service_names_;  // as last listed
  // Killed groups of pods that vanished from the API, reaped by later passes.
  std::vector<int> orphans_;
  std::optional<int64_t> lease_renewed_at_;  // clock nanos of the last renewal
  // This node as last read (labels, taints, cordon), for placement; and
  // when it was read (clock nanos).
  nlohmann::json node_ = nlohmann::json::object();
  std::optional<int64_t> node_read_at_;
};

}  // namespace kubetrain::node_agent

#endif  // KUBETRAIN_TOOLS_NODE_AGENT_NODE_AGENT_H_
