// Logger: where the operator's parts write what they do. Passed by pointer
// from main.cc (no global logger); StreamLogger writes one line per message,
// as text ("2026-11-22T07:55:00.123Z info  informer/pods: synced 12 objects")
// or as JSON ({"ts":...,"level":"info","logger":"informer/pods","msg":...}).
// Implementations are thread-safe.
#ifndef KUBETRAIN_OPERATOR_KUBE_LOGGER_H_
#define KUBETRAIN_OPERATOR_KUBE_LOGGER_H_

#include <ostream>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace kubetrain::kube {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

class Logger {
 public:
  virtual ~Logger() = default;
  virtual void Log(LogLevel level, absl::string_view component, absl::string_view message) = 0;
  virtual bool Enabled(LogLevel level) const { return true; }

  void Debug(absl::string_view c, absl::string_view m) {
    if (Enabled(LogLevel::kDebug)) Log(LogLevel::kDebug, c, m);
  }
  void Info(absl::string_view c, absl::string_view m) { Log(LogLevel::kInfo, c, m); }
  void Warning(absl::string_view c, absl::string_view m) { Log(LogLevel::kWarning, c, m); }
  void Error(absl::string_view c, absl::string_view m) { Log(LogLevel::kError, c, m); }
};

// Drops everything.
class NullLogger final : public Logger {
 public:
  void Log(LogLevel, absl::string_view, absl::string_view) override {}
  bool Enabled(LogLevel) const override { return false; }
};

class StreamLogger final : public Logger {
 public:
  enum class Format { kText, kJson };
  StreamLogger(std::ostream& out, Format format, LogLevel min_level);
  void Log(LogLevel level, absl::string_view component, absl::string_view message) override;
  bool Enabled(LogLevel level) const override { return level >= min_level_; }

 private:
  absl::Mutex mu_;
  std::ostream& out_ ABSL_GUARDED_BY(mu_);
  const Format format_;
  const LogLevel min_level_;
};

absl::string_view LogLevelName(LogLevel level);
// "debug", "info", "warning" (or "warn"), "error"; false when unknown.
bool ParseLogLevel(absl::string_view name, LogLevel* level);

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_OPERATOR_KUBE_LOGGER_H_
