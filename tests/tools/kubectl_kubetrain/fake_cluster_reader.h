// FakeClusterReader: a ClusterReader whose job, pods, events, logs and
// metrics pages a test sets. Log streams are scripted lines; a stage script
// lets `logs -f` tests move the cluster on only once the streams a stage
// opened have been read to their end, so the test is deterministic whatever
// the threads' timing. Thread-safe.
#ifndef KUBETRAIN_TESTS_TOOLS_KUBECTL_KUBETRAIN_FAKE_CLUSTER_READER_H_
#define KUBETRAIN_TESTS_TOOLS_KUBECTL_KUBETRAIN_FAKE_CLUSTER_READER_H_

#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "tools/kubectl_kubetrain/cluster_reader.h"

namespace kubetrain::kubectl_plugin {

// A log stream: lines, then a clean end or `error`; calls `on_end` once.
class ScriptedLogStream final : public kube::HttpStream {
 public:
  ScriptedLogStream(std::vector<std::string> lines, absl::Status error,
                    std::function<void()> on_end)
      : lines_(lines.begin(), lines.end()), error_(std::move(error)), on_end_(std::move(on_end)) {}
  absl::StatusOr<bool> ReadLine(std::string* line) override {
    if (!lines_.empty()) {
      *line = lines_.front();
      lines_.pop_front();
      return true;
    }
    if (on_end_) std::exchange(on_end_, nullptr)();
    if (!error_.ok()) return error_;
    return false;
  }
  void Cancel() override {}

 private:
  std::deque<std::string> lines_;
  absl::Status error_;
  std::function<void()> on_end_;
};

struct ScriptedLog {
  std::vector<std::string> lines;
  absl::Status error;  // after the lines; OK = a clean end
};

// What the cluster looks like until the streams it names have ended.
struct Stage {
  nlohmann::json job;
  std::vector<nlohmann::json> pods;
  // Pod name -> the log a follow request gets in this stage.
  std::map<std::string, ScriptedLog> streams;
};

class FakeClusterReader final : public ClusterReader {
 public:
  void SetJob(nlohmann::json job) {
    absl::MutexLock lock(&mu_);
    job_ = std::move(job);
  }
  void SetPods(std::vector<nlohmann::json> pods) {
    absl::MutexLock lock(&mu_);
    pods_ = std::move(pods);
  }
  void SetEvents(std::vector<nlohmann::json> events) {
    absl::MutexLock lock(&mu_);
    events_ = std::move(events);
  }
  void SetLog(const std::string& pod, absl::StatusOr<std::string> text) {
    absl::MutexLock lock(&mu_);
    logs_.insert_or_assign(pod, std::move(text));
  }
  void SetMetrics(const std::string& pod, absl::StatusOr<std::string> page) {
    absl::MutexLock lock(&mu_);
    metrics_.insert_or_assign(pod, std::move(page));
  }
  // Stages for StreamLog: each stage's pods and job are served until every
  // stream it names has been opened and read to its end; the last stays.
  void SetStages(std::vector<Stage> stages) {
    absl::MutexLock lock(&mu_);
    stages_ = std::move(stages);
    stage_ = 0;
    ApplyStage();
  }
  // Answer requests with timestamps=true (or sinceTime) with a 400, as
  // kubetrain-node-agent's log endpoint does.
  void RefuseTimestamps() {
    absl::MutexLock lock(&mu_);
    refuse_timestamps_ = true;
  }
  int ListCalls() const {
    absl::MutexLock lock(&mu_);
    return list_calls_;
  }
  // Every log request's path.
  std::vector<std::string> LogRequests() const {
    absl::MutexLock lock(&mu_);
    return log_requests_;
  }

  absl::StatusOr<nlohmann::json> GetTrainingJob(const std::string& ns,
                                                const std::string& name) override {
    absl::MutexLock lock(&mu_);
    if (job_.is_null()) return absl::NotFoundError("trainingjobs \"" + name + "\" not found");
    return job_;
  }
  absl::StatusOr<std::vector<nlohmann::json>> ListPods(const std::string&,
                                                       const std::string&) override {
    absl::MutexLock lock(&mu_);
    ++list_calls_;
    return pods_;
  }
  absl::StatusOr<std::vector<nlohmann::json>> ListEvents(const std::string&) override {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  absl::StatusOr<std::string> ReadLog(const std::string& ns, const std::string& pod,
                                      const LogRequest& request) override {
    absl::MutexLock lock(&mu_);
    log_requests_.push_back(PodLogPath(ns, pod, request));
    if (refuse_timestamps_ && (request.timestamps || request.since_unix_micros)) {
      return absl::InvalidArgumentError("timestamps and sinceTime are not supported");
    }
    auto it = logs_.find(pod);
    if (it == logs_.end()) return absl::NotFoundError("pods \"" + pod + "\" not found");
    return it->second;
  }
  absl::StatusOr<std::unique_ptr<kube::HttpStream>> StreamLog(const std::string& ns,
                                                              const std::string& pod,
                                                              const LogRequest& request) override {
    absl::MutexLock lock(&mu_);
    log_requests_.push_back(PodLogPath(ns, pod, request));
    if (refuse_timestamps_ && (request.timestamps || request.since_unix_micros)) {
      return absl::InvalidArgumentError("timestamps and sinceTime are not supported");
    }
    if (stage_ >= stages_.size()) return absl::InvalidArgumentError("no stage");
    Stage& stage = stages_[stage_];
    auto it = stage.streams.find(pod);
    if (it == stage.streams.end() || opened_.count(pod) > 0) {
      // Nothing new for this pod until the stage moves on (a 400 here would
      // read, after a retry that finds the next stage, as a server that
      // refuses timestamps).
      return absl::UnavailableError("no new log for this pod yet");
    }
    opened_.insert(pod);
    const size_t stage_index = stage_;
    return std::unique_ptr<kube::HttpStream>(std::make_unique<ScriptedLogStream>(
        it->second.lines, it->second.error, [this, pod, stage_index] {
          absl::MutexLock lock(&mu_);
          if (stage_index != stage_) return;
          ended_.insert(pod);
          if (ended_.size() == stages_[stage_].streams.size() && stage_ + 1 < stages_.size()) {
            ++stage_;
            ApplyStage();
          }
        }));
  }
  absl::StatusOr<std::string> ReadMetrics(const std::string&, const nlohmann::json& pod) override {
    absl::MutexLock lock(&mu_);
    auto it = metrics_.find(pod["metadata"]["name"].get<std::string>());
    if (it == metrics_.end()) return absl::UnavailableError("no endpoints available");
    return it->second;
  }

 private:
  void ApplyStage() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    job_ = stages_[stage_].job;
    pods_ = stages_[stage_].pods;
    opened_.clear();
    ended_.clear();
  }

  mutable absl::Mutex mu_;
  nlohmann::json job_ ABSL_GUARDED_BY(mu_);
  std::vector<nlohmann::json> pods_ ABSL_GUARDED_BY(mu_);
  std::vector<nlohmann::json> events_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::StatusOr<std::string>> logs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::StatusOr<std::string>> metrics_ ABSL_GUARDED_BY(mu_);
  std::vector<Stage> stages_ ABSL_GUARDED_BY(mu_);
  size_t stage_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::string> opened_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> ended_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> log_requests_ ABSL_GUARDED_BY(mu_);
  int list_calls_ ABSL_GUARDED_BY(mu_) = 0;
  bool refuse_timestamps_ ABSL_GUARDED_BY(mu_) = false;
};

// A replica pod as the operator builds it and a kubelet reports it.
inline nlohmann::json ReplicaPod(const std::string& job, const std::string& type, int index,
                                 const std::string& uid, int restarts, const std::string& state,
                                 const std::string& phase = "Running") {
  const std::string name = job + "-" + type + "-" + std::to_string(index);
  nlohmann::json container_state = nlohmann::json::object();
  if (state == "waiting") {
    container_state["waiting"] = {{"reason", "ContainerCreating"}};
  } else {
    container_state[state] = nlohmann::json::object();
  }
  return {{"metadata",
           {{"name", name},
            {"namespace", "ns"},
            {"uid", uid},
            {"labels",
             {{"kubetrain.io/job-name", job},
              {"kubetrain.io/replica-type", type},
              {"kubetrain.io/replica-index", std::to_string(index)}}}}},
          {"spec", {{"containers", {{{"name", "kubetrain"}}}}, {"nodeName", "node-a"}}},
          {"status",
           {{"phase", phase},
            {"containerStatuses",
             {{{"name", "kubetrain"}, {"restartCount", restarts}, {"state", container_state}}}}}}};
}

inline nlohmann::json JobWithPhase(const std::string& name, const std::string& phase) {
  return {{"metadata", {{"name", name}, {"namespace", "ns"}}},
          {"status", {{"conditions", {{{"type", phase}, {"status", "True"}}}}}}};
}

}  // namespace kubetrain::kubectl_plugin

#endif  // KUBETRAIN_TESTS_TOOLS_KUBECTL_KUBETRAIN_FAKE_CLUSTER_READER_H_
