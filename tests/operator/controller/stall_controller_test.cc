// The Stalled condition end to end against the API emulator (or a real
// cluster with KUBETRAIN_TEST_KUBECONFIG): the test plays the kubelet and
// the replicas' metrics pages. worker-1 freezes (its metrics stop
// answering, as under SIGSTOP or a hung collective) while worker-0 waits at
// its step; runPolicy.stallTimeoutSeconds later the job is Stalled naming
// worker-1, and runPolicy.stallPolicy decides what follows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "api/metric_names.h"
#include "operator/controller/job_status.h"
#include "operator/controller/progress_poller.h"
#include "operator/kube/object.h"
#include "operator/kube/resource.h"
#include "tests/operator/controller/controller_fixture.h"
#include "tests/support/wait_for.h"

namespace kubetrain::controller {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::WaitFor;

// Each worker's page at 10.0.0.<index+1>: worker-0's step advances on every
// read while `advancing`; worker-1 does not answer while `frozen`.
class ReplicaPages final : public MetricsFetcher {
 public:
  ReplicaPages(std::string job, std::string ns) : job_(std::move(job)), ns_(std::move(ns)) {}
  absl::StatusOr<std::string> Fetch(const std::string& url) override {
    ++reads_;
    int index = -1;
    for (int i = 0; i < 2; ++i) {
      if (absl::StrContains(url, absl::StrCat("//10.0.0.", i + 1, ":"))) index = i;
    }
    if (index < 0) return absl::UnavailableError(absl::StrCat("no replica at ", url));
    if (index == 1 && frozen) return absl::DeadlineExceededError("timed out after 2 s");
    const int64_t step = index == 0 && advancing ? ++step0_ : step0_.load();
    const std::string labels =
        absl::StrCat("{", api::kMetricLabelJob, "=\"", job_, "\",", api::kMetricLabelNamespace,
                     "=\"", ns_, "\",", api::kMetricLabelReplicaType, "=\"worker\",",
                     api::kMetricLabelReplicaIndex, "=\"", index, "\"}");
    return absl::StrCat("# TYPE ", api::kMetricGlobalStep, " gauge\n", api::kMetricGlobalStep,
                        labels, " ", step, "\n", api::kMetricAllreduceStallSeconds, labels, " 0\n");
  }

  int reads() const { return reads_.load(); }

  std::atomic<bool> frozen{true};
  std::atomic<bool> advancing{false};

 private:
  const std::string job_, ns_;
  std::atomic<int64_t> step0_{4121};
  std::atomic<int> reads_{0};
};

class StallControllerTest : public ControllerFixture {
 protected:
  // Starts the operator reading `pages`, and a 2-worker job with a 1 s
  // stall timeout (`timeout` s) and `policy`, both workers Running at their
  // addresses.
  void StartJob(const std::string& name, const std::string& policy, int timeout = 1) {
    pages_ = std::make_unique<ReplicaPages>(name, ns());
    ControllerOptions options;
    options.progress_interval = absl::Milliseconds(100);
    options.metrics_fetcher = pages_.get();
    StartController(options);
    CreateJob(MakeJob(
        name, 0, 2,
        Json{{"spec",
              {{"runPolicy", {{"stallTimeoutSeconds", timeout}, {"stallPolicy", policy}}}}}}));
    ASSERT_TRUE(WaitForPods(name, 2));
    for (int i = 0; i < 2; ++i) Run(absl::StrCat(name, "-worker-", i), i);
    ASSERT_TRUE(WaitForCondition(name, kCondRunning));
  }
  void Run(const std::string& pod, int index) {
    SetPodRunning(pod);
    PatchPodStatus(pod, Json{{"podIP", absl::StrCat("10.0.0.", index + 1)}});
  }
  std::string StalledMessage(const std::string& job) {
    const Json status = Status(job);
    const Json* c = FindCondition(status, kCondStalled);
    return c != nullptr ? (*c).value("message", "") : "";
  }

  std::unique_ptr<ReplicaPages> pages_;
};

TEST_F(StallControllerTest, NoneNamesTheFrozenReplicaUntilProgressResumes) {
  StartJob("hang", "None");
  ASSERT_TRUE(WaitForCondition("hang", kCondStalled, absl::Seconds(60)));
  const std::string message = StalledMessage("hang");
  EXPECT_THAT(message, HasSubstr("no progress for 1 s"));
  EXPECT_THAT(message, HasSubstr("worker-1 (pod hang-worker-1) stopped answering"));
  EXPECT_THAT(message, HasSubstr("others wait at step 4121"));
  EXPECT_THAT(message, Not(HasSubstr("worker-0 (")));
  EXPECT_TRUE(WaitForEvent("hang", "Stalled"));
  Json status = Status("hang");
  EXPECT_FALSE(IsFinished(status));
  EXPECT_EQ(status.value("restartCount", 0), 0);
  // worker-1 thaws and the job moves on.
  pages_->frozen = false;
  pages_->advancing = true;
  ASSERT_TRUE(WaitFor([&] {
    const Json status = Status("hang");
    const Json* c = FindCondition(status, kCondStalled);
    return c != nullptr && (*c)["status"] == "False" && (*c)["reason"] == "ProgressResumed";
  }));
  EXPECT_TRUE(WaitForEvent("hang", "ProgressResumed"));
  EXPECT_TRUE(IsConditionTrue(Status("hang"), kCondRunning));
}

TEST_F(StallControllerTest, RestartRecreatesOnlyTheReplicaBehind) {
  StartJob("hangr", "Restart");
  const std::string worker0 = kube::Uid(Pods("hangr")["hangr-worker-0"]);
  const std::string worker1 = kube::Uid(Pods("hangr")["hangr-worker-1"]);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto pods = Pods("hangr");
        return pods.count("hangr-worker-1") && kube::Uid(pods["hangr-worker-1"]) != worker1;
      },
      absl::Seconds(60)));
  EXPECT_EQ(kube::Uid(Pods("hangr")["hangr-worker-0"]), worker0) << "the survivor stays";
  ASSERT_TRUE(WaitFor([&] { return Status("hangr").value("restartCount", 0) == 1; }));
  const Json status = Status("hangr");
  EXPECT_EQ(status["replicaStatuses"]["Worker"].value("restarts", 0), 1);
  const Json* stalled = FindCondition(status, kCondStalled);
  ASSERT_NE(stalled, nullptr);
  EXPECT_EQ((*stalled)["status"], "False");
  EXPECT_EQ((*stalled)["reason"], "StalledReplicasRestarted");
  EXPECT_THAT((*stalled)["message"].get<std::string>(), HasSubstr("worker-1 (pod hangr-worker-1)"));
  // Restarting names the stall while the replacement starts; once it runs
  // (the emulator starts pods at once), Running takes over and Restarting
  // turns False, so either is what a reader may find here.
  const Json* restarting = FindCondition(status, kCondRestarting);
  ASSERT_NE(restarting, nullptr);
  if ((*restarting)["status"] == "True") {
    EXPECT_EQ((*restarting)["reason"], "Stalled");
  } else {
    EXPECT_EQ((*restarting)["reason"], "JobRunning");
    EXPECT_TRUE(IsConditionTrue(status, kCondRunning));
  }
  EXPECT_TRUE(WaitForEvent("hangr", "Stalled"));
  EXPECT_FALSE(IsFinished(status));
}

TEST_F(StallControllerTest, FailFailsTheJobNamingTheReplica) {
  StartJob("hangf", "Fail");
  ASSERT_TRUE(WaitForCondition("hangf", kCondFailed, absl::Seconds(60)));
  const Json status = Status("hangf");
  const Json* failed = FindCondition(status, kCondFailed);
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ((*failed)["reason"], "Stalled");
  EXPECT_THAT((*failed)["message"].get<std::string>(), HasSubstr("worker-1 (pod hangf-worker-1)"));
  EXPECT_TRUE(IsConditionTrue(status, kCondStalled));
}

TEST_F(StallControllerTest, AStallTimeoutOfZeroTurnsTheWatchOff) {
  StartJob("off", "Fail", /*timeout=*/0);
  // worker-0's page is read for status.progress every 100 ms: 30 reads is
  // 3 s, three timeouts of the other tests.
  ASSERT_TRUE(WaitFor([&] { return pages_->reads() >= 30; }, absl::Seconds(30)));
  const Json status = Status("off");
  EXPECT_EQ(FindCondition(status, kCondStalled), nullptr);
  EXPECT_FALSE(IsFinished(status));
}

}  // namespace
}  // namespace kubetrain::controller
