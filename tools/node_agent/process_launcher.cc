#include "tools/node_agent/process_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kubetrain::node_agent {

absl::StatusOr<int> RealProcessLauncher::Launch(const LaunchSpec& spec) {
  if (spec.argv.empty()) return absl::InvalidArgumentError("empty argv");
  const int log_fd = open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return absl::InternalError(absl::StrCat("open ", spec.log_path, ": ", std::strerror(errno)));
  }
  // Everything the child needs, built before fork.
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = getpid();

  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(137);  // the agent died before prctl
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    if (!spec.working_dir.empty() && chdir(spec.working_dir.c_str()) != 0) {
      dprintf(2, "kubetrain-node-agent: chdir %s: %s\n", spec.working_dir.c_str(),
              std::strerror(errno));
      _exit(127);
    }
    execvpe(argv[0], argv.data(), envp.data());
    dprintf(2, "kubetrain-node-agent: exec %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  close(log_fd);
  setpgid(pid, pid);  // also from the parent, so SignalGroup works at once
  return static_cast<int>(pid);
}

void RealProcessLauncher::SignalGroup(int pid, int signal) { kill(-pid, signal); }

std::optional<int> RealProcessLauncher::PollExit(int pid) {
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return std::nullopt;
  if (r < 0) return 128 + SIGKILL;  // not our child any more: treat as killed
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return std::nullopt;
}

}  // namespace kubetrain::node_agent
