// ProcessLauncher: starts a container's process as the leader of its own
// process group, with its output appended to a log file, and reports how it
// ended. RealProcessLauncher forks and execs; tests use a fake. Not
// thread-safe: the agent calls it from its one loop.
#ifndef KUBETRAIN_TOOLS_NODE_AGENT_PROCESS_LAUNCHER_H_
#define KUBETRAIN_TOOLS_NODE_AGENT_PROCESS_LAUNCHER_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/cluster_spec.h"

namespace kubetrain::node_agent {

struct LaunchSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH
  api::EnvList env;               // the whole environment
  std::string log_path;           // stdout and stderr, appended
  std::string working_dir;        // "" = the agent's
};

class ProcessLauncher {
 public:
  virtual ~ProcessLauncher() = default;
  // The pid, which is also the process group id.
  virtual absl::StatusOr<int> Launch(const LaunchSpec& spec) = 0;
  // Sends `signal` to the whole group. A group that is gone is not an error.
  virtual void SignalGroup(int pid, int signal) = 0;
  // How the process ended, once: its exit code, or 128 + the signal that
  // killed it; nullopt while it runs.
  virtual std::optional<int> PollExit(int pid) = 0;
};

// fork + execvp. The child dies with the agent (PR_SET_PDEATHSIG SIGKILL), so
// a crashed agent leaves no training processes behind.
class RealProcessLauncher final : public ProcessLauncher {
 public:
  absl::StatusOr<int> Launch(const LaunchSpec& spec) override;
  void SignalGroup(int pid, int signal) override;
  std::optional<int> PollExit(int pid) override;
};

}  // namespace kubetrain::node_agent

#endif  // KUBETRAIN_TOOLS_NODE_AGENT_PROCESS_LAUNCHER_H_
