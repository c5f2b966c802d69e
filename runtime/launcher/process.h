// Process: one child program with its own environment, stdout/stderr pipes
// and its own process group (like a container: signals go to the whole
// group, and what is left of the group is killed when the main process
// exits). The child gets SIGKILL if the thread that spawned it dies
// (PR_SET_PDEATHSIG), so a killed launcher leaves no replicas behind.
//
// Not thread-safe: one owner thread spawns, polls and signals it.
#ifndef KUBETRAIN_RUNTIME_LAUNCHER_PROCESS_H_
#define KUBETRAIN_RUNTIME_LAUNCHER_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/replica_policy.h"

namespace kubetrain::launcher {

struct SpawnOptions {
  // argv[0] is a path, or a name looked up in the PATH of `env` (else of
  // this process), as a container runtime does.
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "NAME=value", the child's whole environment
};

class Process {
 public:
  // Starts the program; stdin is /dev/null. NotFound when the program does
  // not exist, FailedPrecondition when it cannot be executed, Internal for
  // system failures.
  static absl::StatusOr<std::unique_ptr<Process>> Spawn(const SpawnOptions& options);

  // Kills the process group (SIGKILL) and reaps the child if still running.
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }

  // The read ends of the child's stdout and stderr (non-blocking). The caller
  // takes ownership and closes them; each returns -1 after the first call.
  int ReleaseStdout();
  int ReleaseStderr();

  // Sends `sig` to the child's process group. OK when it is already gone.
  absl::Status Signal(int sig);

  // Reaps the child if it has exited, without blocking. After the main
  // process exits, what is left of its group is killed (SIGKILL).
  std::optional<api::ReplicaExit> Poll();
  // Blocks until the child exits.
  api::ReplicaExit Wait();
  bool exited() const { return exit_.has_value(); }

 private:
  Process(pid_t pid, int out_fd, int err_fd) : pid_(pid), out_fd_(out_fd), err_fd_(err_fd) {}
  void Reaped(int status);

  pid_t pid_;
  int out_fd_;
  int err_fd_;
  std::optional<api::ReplicaExit> exit_;
};

}  // namespace kubetrain::launcher

#endif  // KUBETRAIN_RUNTIME_LAUNCHER_PROCESS_H_
