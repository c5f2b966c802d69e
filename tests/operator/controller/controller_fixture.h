// ControllerFixture: a TrainingJobController running against the API
// emulator (or KUBETRAIN_TEST_KUBECONFIG), plus the kubelet's part played
// by the test: pods' phases, exit codes and restart counts are set through
// the /status subresource.
#ifndef KUBETRAIN_TESTS_OPERATOR_CONTROLLER_CONTROLLER_FIXTURE_H_
#define KUBETRAIN_TESTS_OPERATOR_CONTROLLER_CONTROLLER_FIXTURE_H_

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "operator/controller/operator_metrics.h"
#include "operator/controller/training_job_controller.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/logger.h"
#include "testing/kube_test_target.h"

namespace kubetrain::controller {

using Json = nlohmann::json;

// A job's status JSON as a client reads it: the condition object of `type`
// (null when absent, found as kubectl's jsonpath would), and what the typed
// status (api/job_status.h) read from that JSON says; JSON the typed status
// cannot read fails the test.
const Json* FindCondition(const Json& status, const std::string& type);
bool IsConditionTrue(const Json& status, const std::string& type);
bool IsFinished(const Json& status);
std::string Phase(const Json& status);
// The value of env var `name` in a pod's first container, "<absent>" without it.
std::string EnvValue(const Json& pod, const std::string& name);

// Counts what the controller reports.
class CountingMetrics final : public OperatorMetrics {
 public:
  void JobCreated(const std::string&) override { Bump("created"); }
  void JobSucceeded(const std::string&) override { Bump("succeeded"); }
  void JobFailed(const std::string&) override { Bump("failed"); }
  void JobRestarted(const std::string&) override { Bump("restarted"); }
  void ReplicaFailed(const std::string&, const std::string& reason) override {
    Bump("failure:" + reason);
  }
  void PodCreated(const std::string&) override { Bump("pods"); }
  void MembershipChanged(const std::string&) override { Bump("membership"); }
  void SetJobPhases(const std::map<std::pair<std::string, std::string>, int>&) override {}
  void ObserveReconcile(double, bool error) override { Bump(error ? "errors" : "reconciles"); }
  void SetQueueDepth(int) override {}
  void SetLeader(bool) override {}
  int Get(const std::string& name) const {
    absl::MutexLock lock(&mu_);
    auto it = counts_.find(name);
    return it == counts_.end() ? 0 : it->second;
  }

 private:
  void Bump(const std::string& name) {
    absl::MutexLock lock(&mu_);
    ++counts_[name];
  }
  mutable absl::Mutex mu_;
  std::map<std::string, int> counts_;
};

// Plans the controllers' action runners were given and finished.
class PlanCounter final : public ActionObserver {
 public:
  void OnSubmit() override { ++submitted_; }
  void OnPlan(absl::Duration, absl::Duration, bool) override { ++finished_; }
  // Every request a pass decided on so far has gone out.
  bool Idle() const { return submitted_.load() == finished_.load(); }

 private:
  std::atomic<int> submitted_{0};
  std::atomic<int> finished_{0};
};

class ControllerFixture : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Starts (another) controller on its own client.
  std::unique_ptr<TrainingJobController> NewController(OperatorMetrics* metrics,
                                                       ControllerOptions options = {});
  void StartController(ControllerOptions options = {});
  void StopController();

  // A job with `ps` PS and `workers` Worker replicas; `patch` is merged
  // into it (JSON merge patch) for policies.
  Json MakeJob(const std::string& name, int ps, int workers, const Json& patch = Json::object());
  Json CreateJob(const Json& job);
  Json GetJob(const std::string& name);
  Json Status(const std::string& name);
  // The owned pods of a job by name (not being deleted unless `all`).
  std::map<std::string, Json> Pods(const std::string& job, bool all = false);
  std::map<std::string, Json> Services(const std::string& job);
  // Kubelet stand-in.
  void SetPodRunning(const std::string& pod, int restart_count = 0);
  void SetPodSucceeded(const std::string& pod);
  void SetPodFailed(const std::string& pod, int exit_code, const std::string& reason = "Error");
  // Merges `status` into the pod's status, as a kubelet's patch would.
  void PatchPodStatus(const std::string& pod, const Json& status);
  void SetAllRunning(const std::string& job);

  bool WaitForPods(const std::string& job, size_t n);
  bool WaitForCondition(const std::string& job, const std::string& type,
                        absl::Duration timeout = absl::Seconds(30));
  std::vector<std::string> EventReasons(const std::string& job);
  // Events are recorded after the API write they describe: wait for them.
  bool WaitForEvent(const std::string& job, const std::string& reason);

  kube::KubeClient& client() { return target_->client(); }
  const std::string& ns() { return target_->ns(); }

  std::unique_ptr<testing::KubeTestTarget> target_;
  CountingMetrics metrics_;
  // Every controller of the test reports its plans here.
  PlanCounter plans_;
  RealClock clock_;
  kube::StreamLogger logger_{std::cerr, kube::StreamLogger::Format::kText,
                             kube::LogLevel::kWarning};
  // Clients of the controllers; destroyed after them.
  std::vector<std::unique_ptr<kube::KubeClient>> clients_;
  std::unique_ptr<TrainingJobController> controller_;
};

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_TESTS_OPERATOR_CONTROLLER_CONTROLLER_FIXTURE_H_
