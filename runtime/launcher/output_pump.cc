#include "runtime/launcher/output_pump.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace kubetrain::launcher {
namespace {

constexpr size_t kMaxLine = 64 * 1024;
// A stray writer (a grandchild that escaped its group) cannot hold Stop().
constexpr int kMaxFinalReads = 256;

}  // namespace

void LineWriter::Write(std::ostream& sink, const std::string& prefix, std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::string text;
  text.reserve(prefix.size() + line.size() + 2);
  text.append(prefix);
  text.push_back(' ');
  text.append(line);
  text.push_back('\n');
  absl::MutexLock lock(&mu_);
  sink.write(text.data(), static_cast<std::streamsize>(text.size()));
  sink.flush();
  // Remember summary lines ("final ...") so the launcher can repeat them.
  if (line.starts_with("final ")) last_lines_[prefix].emplace_back(line);
}

std::string LineWriter::LastLineStartingWith(const std::string& prefix, std::string_view start) {
  absl::MutexLock lock(&mu_);
  auto it = last_lines_.find(prefix);
  if (it == last_lines_.end()) return "";
  for (auto l = it->second.rbegin(); l != it->second.rend(); ++l) {
    if (std::string_view(*l).starts_with(start)) return *l;
  }
  return "";
}

OutputPump::~OutputPump() { Stop(); }

absl::Status OutputPump::Start() {
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    return absl::InternalError(absl::StrCat("eventfd failed: ", std::strerror(errno)));
  }
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

int OutputPump::Add(int fd, std::string prefix, std::ostream* sink) {
  auto s = std::make_unique<Stream>();
  s->fd = fd;
  s->prefix = std::move(prefix);
  s->sink = sink;
  int id;
  {
    absl::MutexLock lock(&mu_);
    id = next_id_++;
    streams_[id] = std::move(s);
  }
  Wake();
  return id;
}

bool OutputPump::DrainedLocked(int id) const {
  auto it = streams_.find(id);
  return it == streams_.end() || it->second->drained || stopping_;
}

bool OutputPump::WaitDrained(int id, std::chrono::steady_clock::time_point deadline) {
  absl::MutexLock lock(&mu_);
  while (!DrainedLocked(id)) {
    // The deadline is on the steady clock: wait for what is left of it.
    const std::chrono::steady_clock::duration left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return false;
    cv_.WaitWithTimeout(&mu_, absl::FromChrono(left));
  }
  return true;
}

void OutputPump::Wake() {
  if (wake_fd_ < 0) return;
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

void OutputPump::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  Wake();
  if (thread_.joinable()) thread_.join();
  // Without a thread (never started) or after it: close what is left.
  absl::MutexLock lock(&mu_);
  for (auto& [id, s] : streams_) {
    if (s->fd >= 0) {
      for (int i = 0; i < kMaxFinalReads && ReadSome(*s) == ReadResult::kData; ++i) {
      }
      Finish(*s);
    }
  }
  if (wake_fd_ >= 0) close(wake_fd_);
  wake_fd_ = -1;
  cv_.SignalAll();
}

OutputPump::ReadResult OutputPump::ReadSome(Stream& s) {
  char buf[16384];
  ssize_t n;
  do {
    n = read(s.fd, buf, sizeof(buf));
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    s.partial.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (;;) {
      const size_t nl = s.partial.find('\n', start);
      if (nl == std::string::npos) break;
      writer_->Write(*s.sink, s.prefix, std::string_view(s.partial).substr(start, nl - start));
      start = nl + 1;
    }
    s.partial.erase(0, start);
    while (s.partial.size() >= kMaxLine) {
      writer_->Write(*s.sink, s.prefix, std::string_view(s.partial).substr(0, kMaxLine));
      s.partial.erase(0, kMaxLine);
    }
    return ReadResult::kData;
  }
  if (n < 0 && errno == EAGAIN) return ReadResult::kEmpty;
  return ReadResult::kEnd;  // end of file or a read error
}

void OutputPump::Finish(Stream& s) {
  if (!s.partial.empty()) writer_->Write(*s.sink, s.prefix, s.partial);
  s.partial.clear();
  if (s.fd >= 0) close(s.fd);
  s.fd = -1;
  s.drained = true;
}

void OutputPump::Loop() {
  std::vector<pollfd> fds;
  std::vector<Stream*> owners;
  for (;;) {
    fds.clear();
    owners.clear();
    bool stopping;
    {
      absl::MutexLock lock(&mu_);
      stopping = stopping_;
      for (auto& [id, s] : streams_) {
        if (s->fd >= 0) {
          fds.push_back({s->fd, POLLIN, 0});
          owners.push_back(s.get());
        }
      }
    }
    if (stopping) {
      // Final drain: the children are gone, so what they wrote is in the
      // pipes already; read until empty, then finish every stream.
      for (Stream* s : owners) {
        for (int i = 0; i < kMaxFinalReads && ReadSome(*s) == ReadResult::kData; ++i) {
        }
        absl::MutexLock lock(&mu_);
        Finish(*s);
      }
      cv_.SignalAll();
      return;
    }
    fds.push_back({wake_fd_, POLLIN, 0});
    const int n = poll(fds.data(), fds.size(), -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds.back().revents & POLLIN) {
      uint64_t count;
      (void)!read(wake_fd_, &count, sizeof(count));
    }
    bool finished_any = false;
    for (size_t i = 0; i + 1 < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      if (ReadSome(*owners[i]) == ReadResult::kEnd) {
        absl::MutexLock lock(&mu_);
        Finish(*owners[i]);
        finished_any = true;
      }
    }
    if (finished_any) cv_.SignalAll();
  }
}

}  // namespace kubetrain::launcher
