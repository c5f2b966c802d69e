#include "runtime/train/termination_message.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "api/env_vars.h"
#include "api/failure_reason.h"

namespace kubetrain::train {

void ErrorTee::Take(char c) {
  if (c != '\n') {
    line_ += c;
    return;
  }
  if (!line_.empty()) {
    if (absl::StartsWith(line_, api::kRuntimeErrorPrefix)) last_error_ = line_;
    last_line_ = line_;
  }
  line_.clear();
}

int ErrorTee::overflow(int c) {
  if (c == traits_type::eof()) return traits_type::not_eof(c);
  Take(static_cast<char>(c));
  out_.put(static_cast<char>(c));
  return c;
}

std::streamsize ErrorTee::xsputn(const char* s, std::streamsize n) {
  for (std::streamsize i = 0; i < n; ++i) Take(s[i]);
  out_.write(s, n);
  return n;
}

int ErrorTee::sync() {
  out_.flush();
  return 0;
}

std::string TerminationLogPath(const std::function<const char*(const char*)>& getenv) {
  if (const char* p = getenv(api::kEnvTerminationLog); p != nullptr && *p != '\0') return p;
  std::error_code ec;
  if (std::filesystem::exists(api::kDefaultTerminationLog, ec)) return api::kDefaultTerminationLog;
  return "";
}

absl::Status WriteTerminationMessage(const std::string& path, const std::string& message) {
  std::ofstream out(path, std::ios::trunc);
  out << message << "\n";
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace kubetrain::train
