#include "base/stop_signals.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <utility>

namespace kubetrain::base {
namespace {

sigset_t StopSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void StopSignals::Block() {
  const sigset_t set = StopSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int StopSignals::Wait(absl::Duration timeout) {
  const sigset_t set = StopSet();
  const timespec ts = absl::ToTimespec(std::max(timeout, absl::ZeroDuration()));
  const int sig = sigtimedwait(&set, nullptr, &ts);
  return sig > 0 ? sig : 0;  // EAGAIN (time up) or EINTR (another signal's handler)
}

const char* StopSignals::Name(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    default:
      return "another signal";
  }
}

StopSignalThread::StopSignalThread(std::function<void(int, int)> on_signal)
    : on_signal_(std::move(on_signal)), thread_([this] { Loop(); }) {}

StopSignalThread::~StopSignalThread() {
  done_.store(true);
  // Wakes sigwait(): the signal is blocked everywhere, so it goes to the one
  // thread waiting for it.
  pthread_kill(thread_.native_handle(), SIGTERM);
  thread_.join();
}

void StopSignalThread::Loop() {
  const sigset_t set = StopSet();
  int count = 0;
  while (true) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (done_.load()) return;
    on_signal_(sig, ++count);
  }
}

}  // namespace kubetrain::base
