#include "operator/kube/logger.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace kubetrain::kube {

StreamLogger::StreamLogger(std::ostream& out, Format format, LogLevel min_level)
    : out_(out), format_(format), min_level_(min_level) {}

void StreamLogger::Log(LogLevel level, absl::string_view component, absl::string_view message) {
  if (level < min_level_) return;
  std::string ts = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  std::string line;
  if (format_ == Format::kJson) {
    nlohmann::json j{{"ts", ts},
                     {"level", std::string(LogLevelName(level))},
                     {"logger", std::string(component)},
                     {"msg", std::string(message)}};
    line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    absl::string_view name = LogLevelName(level);
    line = absl::StrCat(ts, " ", name, std::string(8 - name.size(), ' '), component, ": ", message);
  }
  absl::MutexLock lock(&mu_);
  out_ << line << '\n';
  out_.flush();
}

absl::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

bool ParseLogLevel(absl::string_view name, LogLevel* level) {
  if (name == "debug")
    *level = LogLevel::kDebug;
  else if (name == "info")
    *level = LogLevel::kInfo;
  else if (name == "warning" || name == "warn")
    *level = LogLevel::kWarning;
  else if (name == "error")
    *level = LogLevel::kError;
  else
    return false;
  return true;
}

}  // namespace kubetrain::kube
