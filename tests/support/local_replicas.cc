#include "tests/support/local_replicas.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "runtime/launcher/loopback_ports.h"

namespace kubetrain::testing_util {

LocalReplicas::LocalReplicas(std::string binary, int num_ps, int num_workers, int num_evaluators)
    : binary_(std::move(binary)) {
  absl::StatusOr<std::vector<int>> ports =
      launcher::AllocateLoopbackPorts(num_ps + num_workers + num_evaluators);
  EXPECT_TRUE(ports.ok()) << ports.status();
  for (int i = 0; i < num_ps; ++i) ps_.push_back(absl::StrCat("127.0.0.1:", (*ports)[i]));
  for (int i = 0; i < num_workers; ++i) {
    workers_.push_back(absl::StrCat("127.0.0.1:", (*ports)[num_ps + i]));
  }
  for (int i = 0; i < num_evaluators; ++i) {
    evaluators_.push_back(absl::StrCat("127.0.0.1:", (*ports)[num_ps + num_workers + i]));
  }
}

std::string LocalReplicas::Key(const std::string& type, int index) {
  return absl::StrCat(type, "-", index);
}

std::string LocalReplicas::TfConfig(const std::string& type, int index) const {
  auto list = [](const std::vector<std::string>& v) {
    return absl::StrCat("[\"", absl::StrJoin(v, "\",\""), "\"]");
  };
  // Keys in sorted order, as Go's encoding/json writes the map.
  std::string cluster;
  if (!evaluators_.empty()) cluster = absl::StrCat("\"evaluator\":", list(evaluators_), ",");
  if (!ps_.empty()) absl::StrAppend(&cluster, "\"ps\":", list(ps_), ",");
  std::vector<std::string> workers = workers_;
  if (visible_workers_ >= 0 && static_cast<size_t>(visible_workers_) < workers.size()) {
    workers.resize(static_cast<size_t>(visible_workers_));
  }
  absl::StrAppend(&cluster, "\"worker\":", list(workers));
  return absl::StrCat("{\"cluster\":{", cluster, "},\"task\":{\"type\":\"", type,
                      "\",\"index\":", index, "},\"environment\":\"cloud\"}");
}

void LocalReplicas::Start(const std::string& type, int index, const std::vector<std::string>& args,
                          const std::vector<std::string>& extra_env) {
  std::vector<std::string> argv = {binary_, "train"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> env = extra_env;
  env.push_back("TF_CONFIG=" + TfConfig(type, index));
  replicas_[Key(type, index)] = std::make_unique<RunningProcess>(argv, env);
}

void LocalReplicas::StartAll(const std::vector<std::string>& args) {
  for (size_t i = 0; i < ps_.size(); ++i) Start("ps", static_cast<int>(i), args);
  for (size_t i = 0; i < workers_.size(); ++i) Start("worker", static_cast<int>(i), args);
}

void LocalReplicas::Kill(const std::string& type, int index, int sig) {
  auto it = replicas_.find(Key(type, index));
  ASSERT_NE(it, replicas_.end());
  it->second->Signal(sig);
}

int LocalReplicas::Wait(const std::string& type, int index, std::chrono::seconds timeout) {
  auto it = replicas_.find(Key(type, index));
  return it == replicas_.end() ? -1 : it->second->Wait(timeout);
}

bool LocalReplicas::WaitAll(std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& [key, r] : replicas_) {
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(
        deadline - std::chrono::steady_clock::now());
    if (r->Wait(std::max(left, std::chrono::seconds(1))) < 0) return false;
  }
  return true;
}

int LocalReplicas::ExitCode(const std::string& type, int index) const {
  auto it = replicas_.find(Key(type, index));
  return it == replicas_.end() ? -1 : it->second->exit_code();
}

std::string LocalReplicas::Output(const std::string& type, int index) const {
  auto it = replicas_.find(Key(type, index));
  return it == replicas_.end() ? "" : it->second->Output();
}

}  // namespace kubetrain::testing_util

namespace kubetrain::testing_util {

bool LocalReplicas::WaitForOutput(const std::string& type, int index,
                                  const std::function<bool(const std::string&)>& pred,
                                  std::chrono::seconds timeout) {
  auto it = replicas_.find(Key(type, index));
  return it != replicas_.end() && it->second->WaitForOutput(pred, timeout);
}

}  // namespace kubetrain::testing_util
