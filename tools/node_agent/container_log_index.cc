#include "tools/node_agent/container_log_index.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kubetrain::node_agent {
namespace {

int64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

absl::Status Append(const std::string& path, const std::string& line) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", path, ": ", std::strerror(errno)));
  ssize_t n;
  do {
    n = write(fd, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  const int write_errno = errno;
  close(fd);
  if (n != static_cast<ssize_t>(line.size())) {
    return absl::InternalError(absl::StrCat("write ", path, ": ", std::strerror(write_errno)));
  }
  return absl::OkStatus();
}

}  // namespace

std::string RunIndexPath(const std::string& log_path) { return log_path + ".runs"; }

absl::Status CreateRunIndex(const std::string& log_path) {
  return Append(RunIndexPath(log_path), "");
}

absl::Status RecordRunStart(const std::string& log_path) {
  return Append(RunIndexPath(log_path), absl::StrCat("start ", FileSize(log_path), "\n"));
}

absl::Status RecordRunEnd(const std::string& log_path, int exit_code) {
  return Append(RunIndexPath(log_path),
                absl::StrCat("end ", FileSize(log_path), " ", exit_code, "\n"));
}

std::vector<LogRun> ParseRunIndex(std::string_view text) {
  std::vector<LogRun> runs;
  const size_t complete = text.rfind('\n');
  if (complete == std::string_view::npos) return runs;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(text.data(), complete), '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t offset = 0;
    if (f.size() < 2 || !absl::SimpleAtoi(f[1], &offset) || offset < 0) continue;
    if (f[0] == "start") {
      // A start ends the run before it too (its end was lost with a killed agent).
      if (!runs.empty() && !runs.back().end) runs.back().end = std::max(offset, runs.back().begin);
      runs.push_back({offset, std::nullopt});
    } else if (f[0] == "end" && !runs.empty() && !runs.back().end) {
      runs.back().end = std::max(offset, runs.back().begin);
    }
  }
  return runs;
}

absl::StatusOr<LogRun> SelectRun(const std::vector<LogRun>& runs, bool previous,
                                 const std::string& pod, const std::string& container) {
  if (previous) {
    // An ended last run is the container's last termination (it waits to
    // restart): the kubelet's lastState.
    if (!runs.empty() && runs.back().end) return runs.back();
    if (runs.size() < 2) {
      return absl::FailedPreconditionError(absl::StrCat(
          "previous terminated container \"", container, "\" in pod \"", pod, "\" not found"));
    }
    return runs[runs.size() - 2];
  }
  if (runs.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("container \"", container, "\" in pod \"",
                                                      pod,
                                                      "\" is waiting to start: ContainerCreating"));
  }
  return runs.back();
}

size_t TailStart(std::string_view bytes, int64_t tail_lines) {
  if (tail_lines <= 0) return bytes.size();
  size_t at = bytes.size();
  // A final newline ends the last line; it does not start another.
  if (at > 0 && bytes[at - 1] == '\n') --at;
  int64_t lines = 0;
  while (at > 0) {
    const size_t nl = bytes.rfind('\n', at - 1);
    if (nl == std::string_view::npos) return 0;
    if (++lines == tail_lines) return nl + 1;
    at = nl;
  }
  return 0;
}

}  // namespace kubetrain::node_agent
