// Elastic workers (spec.elasticPolicy) through the whole operator, against
// the API emulator: `kubectl scale` through the scale subresource creates
// and deletes workers (highest index first) without restarts or failures, a
// scale beyond maxReplicas is refused (ScaleRefused), the Waiting condition
// follows the running workers, and the runtime's world (its metrics) becomes
// status.worldSize/generation with a MembershipChanged event.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "operator/controller/job_status.h"
#include "operator/controller/progress_poller.h"
#include "operator/kube/object.h"
#include "operator/kube/resource.h"
#include "tests/operator/controller/controller_fixture.h"
#include "tests/support/wait_for.h"

namespace kubetrain::controller {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using testing_util::WaitFor;

class ElasticControllerTest : public ControllerFixture {
 protected:
  Json ElasticJob(const std::string& name, int workers, int min, int max) {
    return MakeJob(name, 0, workers,
                   Json{{"spec",
                         {{"elasticPolicy", {{"minReplicas", min}, {"maxReplicas", max}}},
                          {"replicaSpecs", {{"Worker", {{"restartPolicy", "ExitCode"}}}}}}}});
  }
  // kubectl scale tj/<name> --replicas=n: a merge patch of the Scale.
  void Scale(const std::string& name, int replicas) {
    absl::StatusOr<Json> scaled = client().MergePatch(
        kube::kTrainingJobs, ns(), name, Json{{"spec", {{"replicas", replicas}}}}, "scale");
    ASSERT_TRUE(scaled.ok()) << scaled.status();
    EXPECT_EQ((*scaled)["spec"]["replicas"], replicas);
  }
  // The condition of `type` of the job's stored status (null JSON when absent).
  Json Condition(const std::string& job, const std::string& type) {
    const Json status = Status(job);
    const Json* c = FindCondition(status, type);
    return c == nullptr ? Json() : *c;
  }
  std::string Message(const std::string& job, const std::string& type) {
    const Json c = Condition(job, type);
    return c.is_object() ? c.value("message", "") : "<absent>";
  }
  std::set<std::string> Names(const std::map<std::string, Json>& objects) {
    std::set<std::string> out;
    for (const auto& [name, o] : objects) out.insert(name);
    return out;
  }
};

TEST_F(ElasticControllerTest, ScaleUpAndDownWithoutRestartsOrFailures) {
  StartController();
  CreateJob(ElasticJob("el", 2, 1, 4));
  ASSERT_TRUE(WaitForPods("el", 2));
  for (const auto& [name, pod] : Pods("el")) {
    EXPECT_EQ(EnvValue(pod, "KUBETRAIN_MIN_WORKERS"), "1") << name;
    EXPECT_EQ(EnvValue(pod, "KUBETRAIN_MAX_WORKERS"), "4") << name;
  }
  SetAllRunning("el");
  ASSERT_TRUE(WaitForCondition("el", kCondRunning));

  // Scale up: the missing indexes, with their Services; the new pods'
  // TF_CONFIG lists the workers of the current spec.
  Scale("el", 4);
  ASSERT_TRUE(WaitForPods("el", 4));
  ASSERT_TRUE(WaitFor([&] { return Services("el").size() == 4; }));
  const std::string n = ns();
  EXPECT_EQ(
      EnvValue(Pods("el")["el-worker-3"], "TF_CONFIG"),
      absl::StrCat(R"({"cluster":{"worker":["el-worker-0.)", n, R"(.svc:2222","el-worker-1.)", n,
                   R"(.svc:2222","el-worker-2.)", n, R"(.svc:2222","el-worker-3.)", n,
                   R"(.svc:2222"]},"task":{"type":"worker","index":3},"environment":"cloud"})"));
  SetAllRunning("el");
  ASSERT_TRUE(WaitFor([&] { return Status("el")["replicaStatuses"]["Worker"]["active"] == 4; }));
  // What the scale subresource's status.replicas and selector read (an
  // HPA's input).
  EXPECT_EQ(Status("el")["replicaStatuses"]["Worker"]["selector"],
            "kubetrain.io/job-name=el,kubetrain.io/replica-type=worker");

  // Scale down to 1: workers 3, 2, 1 and their Services go; worker-0 stays.
  // worker-3 is held Terminating (a finalizer) and exits 0 meanwhile, as a
  // runtime that leaves cleanly does: that is neither a success of the job
  // nor a failure, and nothing is recreated.
  ASSERT_TRUE(client()
                  .MergePatch(kube::kPods, ns(), "el-worker-3",
                              Json{{"metadata", {{"finalizers", {"kubetrain.io/test-hold"}}}}})
                  .ok());
  Scale("el", 1);
  ASSERT_TRUE(WaitFor([&] { return Names(Pods("el")) == std::set<std::string>{"el-worker-0"}; }));
  ASSERT_TRUE(
      WaitFor([&] { return Names(Services("el")) == std::set<std::string>{"el-worker-0"}; }));
  ASSERT_TRUE(Pods("el", /*all=*/true).contains("el-worker-3"));  // Terminating
  SetPodSucceeded("el-worker-3");
  EXPECT_FALSE(IsFinished(Status("el")));
  // Until the deleted pods are gone the operator's status write of the
  // counts waits (its delete expectations), as after any delete.
  ASSERT_TRUE(client()
                  .MergePatch(kube::kPods, ns(), "el-worker-3",
                              Json{{"metadata", {{"finalizers", nullptr}}}})
                  .ok());
  ASSERT_TRUE(WaitFor([&] { return !Pods("el", /*all=*/true).contains("el-worker-3"); }));
  ASSERT_TRUE(WaitFor([&] { return Status("el")["replicaStatuses"]["Worker"]["active"] == 1; }));
  // A later pass (the next scale-up's) has seen worker-3's exit.
  Scale("el", 2);
  ASSERT_TRUE(WaitForPods("el", 2));
  const Json status = Status("el");
  EXPECT_FALSE(IsFinished(status)) << status.dump();
  EXPECT_EQ(status.value("restartCount", 0), 0);
  EXPECT_FALSE(status.contains("lastFailure")) << status.dump();
  EXPECT_EQ(metrics_.Get("restarted"), 0);
  EXPECT_EQ(metrics_.Get("pods"), 5);  // worker-1 again for the scale-up; nothing recreated
  std::vector<std::string> reasons = EventReasons("el");
  EXPECT_THAT(reasons, Contains("SuccessfulDeletePod"));
  EXPECT_THAT(reasons, Contains("SuccessfulDeleteService"));
  EXPECT_THAT(reasons, ::testing::Not(Contains("Restarting")));
  // The job still ends as a fixed one does: worker-0 decides.
  SetPodSucceeded("el-worker-0");
  ASSERT_TRUE(WaitForCondition("el", kCondSucceeded));
}

TEST_F(ElasticControllerTest, AScaleAboveMaxReplicasRunsMaxAndIsRefusedInAnEvent) {
  StartController();
  CreateJob(ElasticJob("cap", 2, 1, 3));
  ASSERT_TRUE(WaitForPods("cap", 2));
  SetAllRunning("cap");
  ASSERT_TRUE(WaitForCondition("cap", kCondRunning));
  Scale("cap", 5);  // no admission webhook is installed here to refuse it
  ASSERT_TRUE(WaitForPods("cap", 3));
  SetAllRunning("cap");
  ASSERT_TRUE(WaitForEvent("cap", "ScaleRefused"));
  EXPECT_EQ(Pods("cap").size(), 3u);
  EXPECT_FALSE(Pods("cap").contains("cap-worker-3"));
  ASSERT_TRUE(WaitFor([&] {
    return Message("cap", kCondRunning).find("maxReplicas") != std::string::npos;
  })) << Message("cap", kCondRunning);
  EXPECT_THAT(Message("cap", kCondRunning),
              HasSubstr("spec.replicaSpecs.Worker.replicas 5 is above "
                        "spec.elasticPolicy.maxReplicas 3: running 3 workers"));
  // Back within range: the note goes.
  Scale("cap", 2);
  ASSERT_TRUE(WaitForPods("cap", 2));
  ASSERT_TRUE(WaitFor([&] {
    return Message("cap", kCondRunning).find("maxReplicas") == std::string::npos;
  })) << Message("cap", kCondRunning);
  EXPECT_FALSE(IsFinished(Status("cap")));
}

TEST_F(ElasticControllerTest, WaitingUntilMinReplicasWorkersRun) {
  StartController();
  CreateJob(ElasticJob("wait", 3, 2, 4));
  ASSERT_TRUE(WaitForPods("wait", 3));
  auto waiting_message = [&]() -> std::string {
    const Json c = Condition("wait", kCondWaiting);
    return c.is_object() ? absl::StrCat(c.value("status", ""), ": ", c.value("message", ""))
                         : "<absent>";
  };
  ASSERT_TRUE(WaitFor([&] {
    return waiting_message() == "True: needs 2 more workers: 0 of minReplicas 2 running";
  })) << waiting_message();
  SetPodRunning("wait-worker-0");
  ASSERT_TRUE(WaitFor([&] {
    return waiting_message() == "True: needs 1 more worker: 1 of minReplicas 2 running";
  })) << waiting_message();
  EXPECT_EQ(Phase(Status("wait")), "Waiting");  // kubectl get tj shows it
  SetPodRunning("wait-worker-2");
  ASSERT_TRUE(WaitFor([&] { return !IsConditionTrue(Status("wait"), kCondWaiting); }))
      << waiting_message();
  EXPECT_EQ(waiting_message(), "False: 2 of minReplicas 2 running");
  EXPECT_TRUE(WaitForEvent("wait", "Waiting"));
  // A fixed job never waits.
  CreateJob(MakeJob("fixed", 0, 2));
  ASSERT_TRUE(WaitForPods("fixed", 2));
  ASSERT_TRUE(WaitForCondition("fixed", kCondCreated));
  EXPECT_TRUE(Condition("fixed", kCondWaiting).is_null());
}

TEST_F(ElasticControllerTest, ASuspendedJobWaitsForNoWorkers) {
  StartController();
  CreateJob(ElasticJob("sus", 2, 2, 3));
  ASSERT_TRUE(WaitForPods("sus", 2));
  ASSERT_TRUE(WaitForCondition("sus", kCondWaiting));
  ASSERT_TRUE(client()
                  .MergePatch(kube::kTrainingJobs, ns(), "sus",
                              Json{{"spec", {{"runPolicy", {{"suspend", true}}}}}})
                  .ok());
  ASSERT_TRUE(WaitForCondition("sus", kCondSuspended));
  ASSERT_TRUE(WaitFor(
      [&] { return Condition("sus", kCondWaiting).value("reason", "") == "JobSuspended"; }));
  EXPECT_EQ(Condition("sus", kCondWaiting)["status"], "False");
}

// A fetcher that answers every URL with one page.
class OnePageFetcher final : public MetricsFetcher {
 public:
  void Set(std::string page) {
    absl::MutexLock lock(&mu_);
    page_ = std::move(page);
  }
  absl::StatusOr<std::string> Fetch(const std::string&) override {
    absl::MutexLock lock(&mu_);
    return page_;
  }

 private:
  absl::Mutex mu_;
  std::string page_ ABSL_GUARDED_BY(mu_);
};

TEST_F(ElasticControllerTest, TheWorldsGenerationsBecomeStatusAndEvents) {
  OnePageFetcher fetcher;
  fetcher.Set(
      "kubetrain_global_step 10\nkubetrain_world_size 2\nkubetrain_world_generation 1\n"
      "kubetrain_world_member{member=\"worker-0\"} 1\n"
      "kubetrain_world_member{member=\"worker-1\"} 1\n");
  ControllerOptions options;
  options.progress_interval = absl::Milliseconds(50);
  options.metrics_fetcher = &fetcher;
  StartController(options);
  CreateJob(ElasticJob("gen", 2, 1, 3));
  ASSERT_TRUE(WaitForPods("gen", 2));
  SetAllRunning("gen");
  ASSERT_TRUE(WaitFor([&] { return Status("gen").value("generation", 0) == 1; }));
  EXPECT_EQ(Status("gen")["worldSize"], 2);
  fetcher.Set(
      "kubetrain_global_step 1200\nkubetrain_world_size 3\nkubetrain_world_generation 2\n"
      "kubetrain_world_member{member=\"worker-0\"} 1\n"
      "kubetrain_world_member{member=\"worker-1\"} 1\n"
      "kubetrain_world_member{member=\"worker-2\"} 1\n");
  ASSERT_TRUE(WaitFor([&] { return Status("gen").value("generation", 0) == 2; }));
  EXPECT_EQ(Status("gen")["worldSize"], 3);
  std::vector<std::string> messages;
  ASSERT_TRUE(WaitFor([&] {
    messages.clear();
    absl::StatusOr<kube::ObjectList> list = client().ListAll(kube::kEvents, ns());
    if (!list.ok()) return false;
    for (const Json& e : list->items) {
      if (e.value("reason", "") == "MembershipChanged") messages.push_back(e.value("message", ""));
    }
    return messages.size() == 2;
  }));
  EXPECT_THAT(messages, Contains("generation 1 formed at step 10: world 2"));
  EXPECT_THAT(messages, Contains("generation 2 formed at step 1200: world 3 (joined worker-2)"));
  EXPECT_TRUE(WaitFor([&] { return metrics_.Get("membership") == 2; }));
}

}  // namespace
}  // namespace kubetrain::controller
