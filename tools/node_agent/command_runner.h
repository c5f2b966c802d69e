// CommandRunner: runs a short administrative command (`ip ...`) to
// completion, so that NetnsNetwork can be tested with a fake that records
// the commands. RealCommandRunner is thread-safe.
#ifndef KUBETRAIN_TOOLS_NODE_AGENT_COMMAND_RUNNER_H_
#define KUBETRAIN_TOOLS_NODE_AGENT_COMMAND_RUNNER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kubetrain::node_agent {

class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  // OK when the command exits 0; else an error quoting the command and its
  // stderr.
  virtual absl::Status Run(const std::vector<std::string>& argv) = 0;
};

// fork + execvp, stdout to /dev/null, stderr captured (first 4 KiB).
class RealCommandRunner final : public CommandRunner {
 public:
  absl::Status Run(const std::vector<std::string>& argv) override;
};

}  // namespace kubetrain::node_agent

#endif  // KUBETRAIN_TOOLS_NODE_AGENT_COMMAND_RUNNER_H_
