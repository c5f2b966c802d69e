// SignalWatcher: turns SIGCHLD (and, when asked, SIGINT and SIGTERM) into
// bytes on a self-pipe, so one poll() loop can wait for child exits, signals
// and timers together. The handlers only write the signal number; the
// previous handlers are restored on destruction.
//
// Process-wide: at most one SignalWatcher exists at a time (Install fails
// with FailedPrecondition otherwise). Not thread-safe; owned by one thread.
#ifndef KUBETRAIN_RUNTIME_LAUNCHER_SIGNAL_WATCHER_H_
#define KUBETRAIN_RUNTIME_LAUNCHER_SIGNAL_WATCHER_H_

#include <signal.h>

#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace kubetrain::launcher {

class SignalWatcher {
 public:
  static absl::StatusOr<std::unique_ptr<SignalWatcher>> Install(bool interrupts);
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  // Readable (POLLIN) when signals have arrived.
  int fd() const { return read_fd_; }
  // The signals received since the last call, in order.
  std::vector<int> Drain();

 private:
  SignalWatcher(int read_fd, int write_fd, bool interrupts)
      : read_fd_(read_fd), write_fd_(write_fd), interrupts_(interrupts) {}

  int read_fd_;
  int write_fd_;
  bool interrupts_;
  struct sigaction old_chld_ {};
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

}  // namespace kubetrain::launcher

#endif  // KUBETRAIN_RUNTIME_LAUNCHER_SIGNAL_WATCHER_H_
