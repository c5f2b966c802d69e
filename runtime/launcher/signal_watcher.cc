#include "runtime/launcher/signal_watcher.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kubetrain::launcher {
namespace {

// The only state a signal handler can reach: the write end of the pipe.
std::atomic<int> g_write_fd{-1};

extern "C" void OnSignal(int sig) {
  const int saved_errno = errno;
  const int fd = g_write_fd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    const unsigned char byte = static_cast<unsigned char>(sig);
    (void)!write(fd, &byte, 1);
  }
  errno = saved_errno;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SignalWatcher>> SignalWatcher::Install(bool interrupts) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat("pipe failed: ", std::strerror(errno)));
  }
  int expected = -1;
  if (!g_write_fd.compare_exchange_strong(expected, fds[1])) {
    close(fds[0]);
    close(fds[1]);
    return absl::FailedPreconditionError("another job is already running in this process");
  }
  std::unique_ptr<SignalWatcher> w(new SignalWatcher(fds[0], fds[1], interrupts));
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, &w->old_chld_);
  if (interrupts) {
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &w->old_int_);
    sigaction(SIGTERM, &sa, &w->old_term_);
  }
  return w;
}

SignalWatcher::~SignalWatcher() {
  sigaction(SIGCHLD, &old_chld_, nullptr);
  if (interrupts_) {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  g_write_fd.store(-1);
  close(read_fd_);
  close(write_fd_);
}

std::vector<int> SignalWatcher::Drain() {
  std::vector<int> out;
  unsigned char buf[64];
  for (;;) {
    const ssize_t n = read(read_fd_, buf, sizeof(buf));
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) out.push_back(buf[i]);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  return out;
}

}  // namespace kubetrain::launcher
