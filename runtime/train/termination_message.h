// The container's termination message: Kubernetes reads the file at the
// container's terminationMessagePath (/dev/termination-log) when it exits
// and reports it in the pod's status, where the operator turns it into
// status.lastFailure (a ConfigError names the runtime's own line). A
// failing runtime writes its last "kubetrain: error:" line there: an
// ErrorTee passes everything written to it on to another stream and keeps
// that line. Not thread-safe (one per program, used from its main thread).
#ifndef KUBETRAIN_RUNTIME_TRAIN_TERMINATION_MESSAGE_H_
#define KUBETRAIN_RUNTIME_TRAIN_TERMINATION_MESSAGE_H_

#include <functional>
#include <ostream>
#include <streambuf>
#include <string>

#include "absl/status/status.h"

namespace kubetrain::train {

class ErrorTee final : public std::streambuf {
 public:
  explicit ErrorTee(std::ostream& out) : out_(out) {}
  // The last complete line that started with "kubetrain: error:" (or, when
  // none did, the last complete line), without its newline; "" when
  // nothing was written.
  std::string last_error() const { return last_error_.empty() ? last_line_ : last_error_; }

 protected:
  int overflow(int c) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;

 private:
  void Take(char c);

  std::ostream& out_;
  std::string line_, last_line_, last_error_;
};

// Where the message goes: $KUBETRAIN_TERMINATION_LOG when set, else
// /dev/termination-log when it exists (inside a pod); "" for neither.
std::string TerminationLogPath(const std::function<const char*(const char*)>& getenv);

// Writes `message` (and a newline) to `path`, replacing what was there.
absl::Status WriteTerminationMessage(const std::string& path, const std::string& message);

}  // namespace kubetrain::train

#endif  // KUBETRAIN_RUNTIME_TRAIN_TERMINATION_MESSAGE_H_
