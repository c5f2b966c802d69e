// Line-prefixed output for `kubetrain run`: LineWriter writes whole lines
// under one mutex so lines from different replicas never interleave
// mid-line; OutputPump reads every child pipe on one thread and writes each
// complete line as "<prefix> <line>".
//
// Both classes are thread-safe.
#ifndef KUBETRAIN_RUNTIME_LAUNCHER_OUTPUT_PUMP_H_
#define KUBETRAIN_RUNTIME_LAUNCHER_OUTPUT_PUMP_H_

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"

namespace kubetrain::launcher {

class LineWriter {
 public:
  // Writes "<prefix> <line>\n" and flushes.
  void Write(std::ostream& sink, const std::string& prefix, std::string_view line);

  // The last line written under `prefix` that starts with `start` (e.g. a
  // trainer's "final ..." line), or "".
  std::string LastLineStartingWith(const std::string& prefix, std::string_view start);

 private:
  std::mutex mu_;
  std::map<std::string, std::vector<std::string>> last_lines_ ABSL_GUARDED_BY(mu_);
};

class OutputPump {
 public:
  explicit OutputPump(LineWriter* writer) : writer_(writer) {}
  ~OutputPump();  // Stop()
  OutputPump(const OutputPump&) = delete;
  OutputPump& operator=(const OutputPump&) = delete;

  absl::Status Start();

  // Takes ownership of `fd` (the read end of a pipe); returns a stream id.
  // Lines longer than 64 KiB are split.
  int Add(int fd, std::string prefix, std::ostream* sink);

  // Waits until stream `id` has reached end of file (all its writers closed)
  // and its last line is written, or until `deadline`. True when drained.
  bool WaitDrained(int id, std::chrono::steady_clock::time_point deadline);

  // Writes what is readable now (including unterminated last lines), closes
  // every stream and joins the thread. Idempotent.
  void Stop();

 private:
  struct Stream {
    int fd = -1;
    std::string prefix;
    std::ostream* sink = nullptr;
    std::string partial;   // only the pump thread touches fd and partial
    bool drained = false;  // guarded by mu_
  };

  enum class ReadResult { kData, kEmpty, kEnd };

  void Loop();
  // One read(): writes the complete lines it finishes. kEnd at end of file
  // or on a read error.
  ReadResult ReadSome(Stream& s);
  void Finish(Stream& s);
  void Wake();

  LineWriter* const writer_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, std::unique_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  int next_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int wake_fd_ = -1;  // eventfd
  std::thread thread_;
};

}  // namespace kubetrain::launcher

#endif  // KUBETRAIN_RUNTIME_LAUNCHER_OUTPUT_PUMP_H_
