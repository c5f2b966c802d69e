#include "tests/support/running_process.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>

#include "gtest/gtest.h"

extern char** environ;

namespace kubetrain::testing_util {

RunningProcess::RunningProcess(const std::vector<std::string>& argv,
                               const std::vector<std::string>& extra_env) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    env[kv.substr(0, kv.find('='))] = kv;
  }
  for (const std::string& kv : extra_env) env[kv.substr(0, kv.find('='))] = kv;
  launcher::SpawnOptions so;
  so.argv = argv;
  for (const auto& [k, kv] : env) so.env.push_back(kv);
  absl::StatusOr<std::unique_ptr<launcher::Process>> p = launcher::Process::Spawn(so);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return;
  process_ = *std::move(p);
  for (int fd : {process_->ReleaseStdout(), process_->ReleaseStderr()}) {
    readers_.emplace_back([this, fd] {
      char buf[8192];
      pollfd pfd = {fd, POLLIN, 0};
      while (true) {
        if (poll(&pfd, 1, 1000) < 0 && errno != EINTR) break;
        const ssize_t n = read(fd, buf, sizeof(buf));
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
        if (n > 0) {
          std::lock_guard<std::mutex> lock(mu_);
          output_.append(buf, static_cast<size_t>(n));
          cv_.notify_all();
        }
      }
      close(fd);
    });
  }
}

RunningProcess::~RunningProcess() {
  if (process_ && !process_->exited()) (void)process_->Signal(SIGKILL);
  Reap();
}

void RunningProcess::Reap() {
  if (process_ && !process_->exited()) exit_code_ = process_->Wait().EffectiveCode();
  for (std::thread& t : readers_) t.join();
  readers_.clear();
}

pid_t RunningProcess::pid() const { return process_ ? process_->pid() : -1; }

void RunningProcess::Signal(int sig) {
  ASSERT_TRUE(process_);
  ASSERT_TRUE(process_->Signal(sig).ok());
}

int RunningProcess::Wait(std::chrono::seconds timeout) {
  if (!process_) return -1;
  if (exit_code_ >= 0) return exit_code_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::optional<api::ReplicaExit> e = process_->Poll()) {
      exit_code_ = e->EffectiveCode();
      Reap();
      return exit_code_;
    }
    // Polling a child's exit (no fd to wait on without taking SIGCHLD).
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

std::string RunningProcess::Output() const {
  std::lock_guard<std::mutex> lock(mu_);
  return output_;
}

bool RunningProcess::WaitForOutput(const std::function<bool(const std::string&)>& pred,
                                   std::chrono::seconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return pred(output_); });
}

double LastValue(const std::string& text, const std::string& key) {
  const size_t pos = text.rfind(key + "=");
  if (pos == std::string::npos) return std::nan("");
  return std::strtod(text.c_str() + pos + key.size() + 1, nullptr);
}

}  // namespace kubetrain::testing_util
