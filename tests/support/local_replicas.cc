#include "tests/support/local_replicas.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "runtime/launcher/loopback_ports.h"

extern char** environ;

namespace kubetrain::testing_util {

LocalReplicas::LocalReplicas(std::string binary, int num_ps, int num_workers)
    : binary_(std::move(binary)) {
  absl::StatusOr<std::vector<int>> ports = launcher::AllocateLoopbackPorts(num_ps + num_workers);
  EXPECT_TRUE(ports.ok()) << ports.status();
  for (int i = 0; i < num_ps; ++i) ps_.push_back(absl::StrCat("127.0.0.1:", (*ports)[i]));
  for (int i = 0; i < num_workers; ++i) {
    workers_.push_back(absl::StrCat("127.0.0.1:", (*ports)[num_ps + i]));
  }
}

LocalReplicas::~LocalReplicas() {
  for (auto& [key, r] : replicas_) {
    if (r->process && !r->process->exited()) (void)r->process->Signal(SIGKILL);
    Reap(*r);
  }
}

std::string LocalReplicas::Key(const std::string& type, int index) {
  return absl::StrCat(type, "-", index);
}

std::string LocalReplicas::TfConfig(const std::string& type, int index) const {
  auto list = [](const std::vector<std::string>& v) {
    return absl::StrCat("[\"", absl::StrJoin(v, "\",\""), "\"]");
  };
  std::string cluster = absl::StrCat("\"worker\":", list(workers_));
  if (!ps_.empty()) cluster = absl::StrCat("\"ps\":", list(ps_), ",", cluster);
  return absl::StrCat("{\"cluster\":{", cluster, "},\"task\":{\"type\":\"", type,
                      "\",\"index\":", index, "},\"environment\":\"cloud\"}");
}

void LocalReplicas::Reap(Replica& r) {
  if (r.process && !r.process->exited()) r.exit_code = r.process->Wait().EffectiveCode();
  for (std::thread& t : r.readers) t.join();
  r.readers.clear();
}

void LocalReplicas::Start(const std::string& type, int index, const std::vector<std::string>& args,
                          const std::vector<std::string>& extra_env) {
  const std::string key = Key(type, index);
  std::unique_ptr<Replica>& slot = replicas_[key];
  if (slot) Reap(*slot);  // a restart: the previous incarnation is gone
  auto r = std::make_unique<Replica>();
  launcher::SpawnOptions so;
  so.argv = {binary_, "train"};
  so.argv.insert(so.argv.end(), args.begin(), args.end());
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string(*e).rfind("TF_CONFIG=", 0) != 0) so.env.push_back(*e);
  }
  so.env.push_back("TF_CONFIG=" + TfConfig(type, index));
  so.env.insert(so.env.end(), extra_env.begin(), extra_env.end());
  absl::StatusOr<std::unique_ptr<launcher::Process>> p = launcher::Process::Spawn(so);
  ASSERT_TRUE(p.ok()) << p.status();
  r->process = *std::move(p);
  Replica* raw = r.get();
  for (int fd : {raw->process->ReleaseStdout(), raw->process->ReleaseStderr()}) {
    raw->readers.emplace_back([this, raw, fd] {
      char buf[8192];
      pollfd pfd = {fd, POLLIN, 0};
      while (true) {
        if (poll(&pfd, 1, 1000) < 0) break;
        const ssize_t n = read(fd, buf, sizeof(buf));
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
        if (n > 0) {
          std::lock_guard<std::mutex> lock(mu_);
          raw->output.append(buf, static_cast<size_t>(n));
          cv_.notify_all();
        }
      }
      close(fd);
    });
  }
  // Keep the old output visible: append to the new replica's record.
  if (slot) {
    std::lock_guard<std::mutex> lock(mu_);
    r->output = slot->output + "--- restarted ---\n" + r->output;
  }
  slot = std::move(r);
}

void LocalReplicas::StartAll(const std::vector<std::string>& args) {
  for (size_t i = 0; i < ps_.size(); ++i) Start("ps", static_cast<int>(i), args);
  for (size_t i = 0; i < workers_.size(); ++i) Start("worker", static_cast<int>(i), args);
}

void LocalReplicas::Kill(const std::string& type, int index, int sig) {
  auto it = replicas_.find(Key(type, index));
  ASSERT_NE(it, replicas_.end());
  ASSERT_TRUE(it->second->process->Signal(sig).ok());
}

int LocalReplicas::Wait(const std::string& type, int index, std::chrono::seconds timeout) {
  auto it = replicas_.find(Key(type, index));
  if (it == replicas_.end()) return -1;
  Replica& r = *it->second;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::optional<api::ReplicaExit> e = r.process->Poll()) {
      r.exit_code = e->EffectiveCode();
      Reap(r);
      return r.exit_code;
    }
    if (r.process->exited()) return r.exit_code;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling a child's exit
  }
  return -1;
}

bool LocalReplicas::WaitAll(std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& [key, r] : replicas_) {
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(
        deadline - std::chrono::steady_clock::now());
    const size_t dash = key.rfind('-');
    if (Wait(key.substr(0, dash), std::stoi(key.substr(dash + 1)),
             std::max(left, std::chrono::seconds(1))) < 0) {
      return false;
    }
  }
  return true;
}

int LocalReplicas::ExitCode(const std::string& type, int index) const {
  auto it = replicas_.find(Key(type, index));
  return it == replicas_.end() ? -1 : it->second->exit_code;
}

std::string LocalReplicas::Output(const std::string& type, int index) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = replicas_.find(Key(type, index));
  return it == replicas_.end() ? "" : it->second->output;
}

bool LocalReplicas::WaitForOutput(const std::string& type, int index,
                                  const std::function<bool(const std::string&)>& pred,
                                  std::chrono::seconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = replicas_.find(Key(type, index));
  if (it == replicas_.end()) return false;
  Replica* r = it->second.get();
  return cv_.wait_for(lock, timeout, [&] { return pred(r->output); });
}

double LastValue(const std::string& text, const std::string& key) {
  const size_t pos = text.rfind(key + "=");
  if (pos == std::string::npos) return std::nan("");
  return std::strtod(text.c_str() + pos + key.size() + 1, nullptr);
}

}  // namespace kubetrain::testing_util
