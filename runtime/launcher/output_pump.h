// Line-prefixed output for `kubetrain run`: LineWriter writes whole lines
// under one mutex so lines from different replicas never interleave
// mid-line; OutputPump reads every child pipe on one thread and writes each
// complete line as "<prefix> <line>".
//
// Both classes are thread-safe.
#ifndef KUBETRAIN_RUNTIME_LAUNCHER_OUTPUT_PUMP_H_
#define KUBETRAIN_RUNTIME_LAUNCHER_OUTPUT_PUMP_H_

#include <chrono>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace kubetrain::launcher {

class LineWriter {
 public:
  // Writes "<prefix> <line>\n" and flushes.
  void Write(std::ostream& sink, const std::string& prefix, std::string_view line)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The last line written under `prefix` that starts with `start` (e.g. a
  // trainer's "final ..." line), or "".
  std::string LastLineStartingWith(const std::string& prefix, std::string_view start)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;  // also serialises the writes to every sink
  std::map<std::string, std::vector<std::string>> last_lines_ ABSL_GUARDED_BY(mu_);
};

class OutputPump {
 public:
  explicit OutputPump(LineWriter* writer) : writer_(writer) {}
  ~OutputPump();  // Stop()
  OutputPump(const OutputPump&) = delete;
  OutputPump& operator=(const OutputPump&) = delete;

  // Starts the pump thread: at most once, from the owner's thread (Stop()
  // writes and closes what was added even without it).
  absl::Status Start();

  // Takes ownership of `fd` (the read end of a pipe); returns a stream id.
  // Lines longer than 64 KiB are split.
  int Add(int fd, std::string prefix, std::ostream* sink) ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until stream `id` has reached end of file (all its writers closed)
  // and its last line is written, or until `deadline`. True when drained.
  bool WaitDrained(int id, std::chrono::steady_clock::time_point deadline) ABSL_LOCKS_EXCLUDED(mu_);

  // Writes what is readable now (including unterminated last lines), closes
  // every stream and joins the thread. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Stream {
    int fd = -1;
    std::string prefix;
    std::ostream* sink = nullptr;
    // Only the pump thread touches fd and partial (Stop, after joining it).
    std::string partial;
    // Guarded by the pump's mu_ (Finish, DrainedLocked); the analysis
    // cannot name another object's mutex, so it is not annotated.
    bool drained = false;
  };

  enum class ReadResult { kData, kEmpty, kEnd };

  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // One read(): writes the complete lines it finishes. kEnd at end of file
  // or on a read error.
  ReadResult ReadSome(Stream& s);
  void Finish(Stream& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // WaitDrained's condition.
  bool DrainedLocked(int id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Wake();

  LineWriter* const writer_;
  absl::Mutex mu_;
  absl::CondVar cv_;  // with mu_: a stream drained, or stopping_
  std::map<int, std::unique_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  int next_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Not guarded: set by Start before the thread runs; Stop closes it once
  // the thread is joined (the owner adds no stream after Stop).
  int wake_fd_ = -1;  // eventfd
  // Not guarded: started by Start, joined by Stop (the owner's thread).
  std::thread thread_;
};

}  // namespace kubetrain::launcher

#endif  // KUBETRAIN_RUNTIME_LAUNCHER_OUTPUT_PUMP_H_
