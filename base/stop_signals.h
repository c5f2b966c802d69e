// Stop signals: how the long-running programs here (the parameter server,
// kubetrain-operator, kubetrain-node-agent, kubetrain-api-emulator,
// kubectl-kubetrain) take SIGTERM and SIGINT, written once. (`kubetrain run`
// and a training replica use launcher::SignalWatcher instead: signal
// handlers, because they must see a signal whatever threads already run, and
// forward it to their children or tell their peers.) main blocks
// them before it starts any thread (threads inherit the mask), so they stay
// pending until the program takes them, in one of two ways:
//   - a program with a loop of its own sleeps in StopSignals::Wait, which
//     returns the signal when one comes (the parameter server, the agent);
//   - any other runs a StopSignalThread, whose thread calls `on_signal` for
//     each signal, counting them (a second SIGTERM may exit at once).
// Thread-safe.
#ifndef KUBETRAIN_BASE_STOP_SIGNALS_H_
#define KUBETRAIN_BASE_STOP_SIGNALS_H_

#include <atomic>
#include <functional>
#include <thread>

#include "absl/time/time.h"

namespace kubetrain::base {

class StopSignals {
 public:
  // Blocks SIGTERM and SIGINT in the calling thread: first thing in main.
  static void Block();
  // Waits up to `timeout` for SIGTERM or SIGINT (blocked): the signal, or 0
  // when the time is up.
  static int Wait(absl::Duration timeout);
  // "SIGTERM", "SIGINT", else "signal N".
  static const char* Name(int sig);
};

class StopSignalThread {
 public:
  // Starts a thread that takes SIGTERM and SIGINT (blocked by
  // StopSignals::Block before any thread started) and calls
  // `on_signal(sig, count)` for each, count 1 for the first.
  explicit StopSignalThread(std::function<void(int sig, int count)> on_signal);
  // Wakes the thread and joins it; signals taken after that stay pending.
  ~StopSignalThread();
  StopSignalThread(const StopSignalThread&) = delete;
  StopSignalThread& operator=(const StopSignalThread&) = delete;

 private:
  void Loop();

  std::function<void(int, int)> on_signal_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace kubetrain::base

#endif  // KUBETRAIN_BASE_STOP_SIGNALS_H_
