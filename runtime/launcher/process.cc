#include "runtime/launcher/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kubetrain::launcher {
namespace {

constexpr char kDefaultPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

absl::StatusOr<std::string> ResolveProgram(const std::string& name,
                                           const std::vector<std::string>& env) {
  if (name.empty()) return absl::InvalidArgumentError("empty program name");
  if (name.find('/') != std::string::npos) return name;
  std::string path_var;
  bool found = false;
  for (const std::string& kv : env) {
    if (kv.rfind("PATH=", 0) == 0) {
      path_var = kv.substr(5);
      found = true;
    }
  }
  if (!found) {
    const char* p = std::getenv("PATH");
    path_var = p != nullptr ? p : kDefaultPath;
  }
  for (absl::string_view dir : absl::StrSplit(path_var, ':')) {
    const std::string candidate =
        absl::StrCat(dir.empty() ? absl::string_view(".") : dir, "/", name);
    if (IsExecutableFile(candidate)) return candidate;
  }
  return absl::NotFoundError(absl::StrCat("\"", name, "\" not found in PATH (", path_var, ")"));
}

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Process>> Process::Spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("no program to run");
  absl::StatusOr<std::string> program = ResolveProgram(options.argv[0], options.env);
  if (!program.ok()) return program.status();

  // Everything the child needs is prepared before fork(): between fork and
  // exec only async-signal-safe calls are allowed.
  std::vector<char*> argv;
  for (const std::string& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : options.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int out[2] = {-1, -1}, err[2] = {-1, -1}, status_pipe[2] = {-1, -1};
  int dev_null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (dev_null < 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 ||
      pipe2(status_pipe, O_CLOEXEC) != 0) {
    const int e = errno;
    for (int* fd :
         {&dev_null, &out[0], &out[1], &err[0], &err[1], &status_pipe[0], &status_pipe[1]}) {
      CloseFd(*fd);
    }
    return absl::InternalError(absl::StrCat("cannot create pipes: ", std::strerror(e)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    for (int* fd :
         {&dev_null, &out[0], &out[1], &err[0], &err[1], &status_pipe[0], &status_pipe[1]}) {
      CloseFd(*fd);
    }
    return absl::InternalError(absl::StrCat("fork failed: ", std::strerror(e)));
  }
  if (pid == 0) {
    // Child.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the launcher is already gone
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
    }
    if (dup2(dev_null, 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0) {
      const int e = errno;
      (void)!write(status_pipe[1], &e, sizeof(e));
      _exit(127);
    }
    execve(program->c_str(), argv.data(), envp.data());
    const int e = errno;
    (void)!write(status_pipe[1], &e, sizeof(e));
    _exit(127);
  }
  // Parent. Also set the group here so that it exists before we signal it,
  // whichever of parent and child runs first (EACCES once it has exec'd).
  setpgid(pid, pid);
  CloseFd(dev_null);
  CloseFd(out[1]);
  CloseFd(err[1]);
  CloseFd(status_pipe[1]);
  int child_errno = 0;
  ssize_t got;
  do {
    got = read(status_pipe[0], &child_errno, sizeof(child_errno));
  } while (got < 0 && errno == EINTR);
  CloseFd(status_pipe[0]);
  if (got == static_cast<ssize_t>(sizeof(child_errno))) {
    // exec failed: the child has exited with 127.
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    CloseFd(out[0]);
    CloseFd(err[0]);
    const std::string what =
        absl::StrCat("cannot execute ", *program, ": ", std::strerror(child_errno));
    if (child_errno == ENOENT) return absl::NotFoundError(what);
    return absl::FailedPreconditionError(what);
  }
  fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
  fcntl(err[0], F_SETFL, fcntl(err[0], F_GETFL) | O_NONBLOCK);
  return std::unique_ptr<Process>(new Process(pid, out[0], err[0]));
}

Process::~Process() {
  if (!exit_) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    Wait();
  }
  CloseFd(out_fd_);
  CloseFd(err_fd_);
}

int Process::ReleaseStdout() {
  const int fd = out_fd_;
  out_fd_ = -1;
  return fd;
}

int Process::ReleaseStderr() {
  const int fd = err_fd_;
  err_fd_ = -1;
  return fd;
}

absl::Status Process::Signal(int sig) {
  if (exit_) return absl::OkStatus();  // reaped: its group was killed then
  if (kill(-pid_, sig) != 0 && errno != ESRCH) {
    // The group may not exist yet if setpgid raced with exec; use the pid.
    if (kill(pid_, sig) != 0 && errno != ESRCH) {
      return absl::InternalError(
          absl::StrCat("kill(", pid_, ", ", sig, ") failed: ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

void Process::Reaped(int status) {
  if (WIFSIGNALED(status)) {
    exit_ = api::ReplicaExit::Signal(WTERMSIG(status));
  } else {
    exit_ = api::ReplicaExit::Code(WEXITSTATUS(status));
  }
  // Like a container whose main process ended: nothing of it stays behind.
  kill(-pid_, SIGKILL);
}

std::optional<api::ReplicaExit> Process::Poll() {
  if (exit_) return exit_;
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) Reaped(status);
  return exit_;
}

api::ReplicaExit Process::Wait() {
  if (exit_) return *exit_;
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) {
    Reaped(status);
  } else {
    exit_ = api::ReplicaExit::Signal(SIGKILL);  // not our child any more (ECHILD)
  }
  return *exit_;
}

}  // namespace kubetrain::launcher
