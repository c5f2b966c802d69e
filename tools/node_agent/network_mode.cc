#include "tools/node_agent/network_mode.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kubetrain::node_agent {

absl::StatusOr<NetworkMode> ParseNetworkMode(const std::string& text) {
  if (text == "auto") return NetworkMode::kAuto;
  if (text == "netns") return NetworkMode::kNetns;
  if (text == "loopback") return NetworkMode::kLoopback;
  return absl::InvalidArgumentError(
      absl::StrCat("--network ", text, ": must be auto, netns or loopback"));
}

NetworkChoice ChooseNetwork(NetworkMode mode, const absl::Status& probe) {
  constexpr char kMeaning[] =
      "every pod runs on this host's network at 127.0.0.1, each Service port gets its own "
      "loopback port and each container's TF_CONFIG, KUBETRAIN_*_HOSTS and MASTER_ADDR/PORT "
      "are rewritten to 127.0.0.1:<that port>; pods are not isolated and have no link to cut";
  switch (mode) {
    case NetworkMode::kNetns:
      return {false, ""};
    case NetworkMode::kLoopback:
      return {true, absl::StrCat("--network loopback: ", kMeaning)};
    case NetworkMode::kAuto:
      break;
  }
  if (probe.ok()) return {false, ""};
  return {true, absl::StrCat("no permission for network namespaces (", probe.message(),
                             "): falling back to loopback: ", kMeaning)};
}

absl::Status ProbeNetworkNamespaces() {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  const pid_t pid = fork();
  if (pid < 0) {
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    // The child's namespace dies with it; only errno matters.
    int err = unshare(CLONE_NEWNET) == 0 ? 0 : errno;
    (void)!write(pipe_fds[1], &err, sizeof(err));
    _exit(0);
  }
  close(pipe_fds[1]);
  int err = -1;
  ssize_t n;
  do {
    n = read(pipe_fds[0], &err, sizeof(err));
  } while (n < 0 && errno == EINTR);
  close(pipe_fds[0]);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (n != static_cast<ssize_t>(sizeof(err))) {
    return absl::InternalError("the network namespace probe died without an answer");
  }
  if (err == 0) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("unshare(CLONE_NEWNET): ", std::strerror(err)));
}

}  // namespace kubetrain::node_agent
