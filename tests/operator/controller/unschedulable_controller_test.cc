// The Unschedulable condition end to end against the API emulator (or a
// real cluster with KUBETRAIN_TEST_KUBECONFIG): the test plays the kubelet
// and the scheduler. worker-1 stays Pending with the scheduler's
// PodScheduled=False message while worker-0 runs; past
// runPolicy.schedulingTimeoutSeconds the job says so naming worker-1, and
// runPolicy.unschedulablePolicy decides what follows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/controller/job_status.h"
#include "operator/kube/object.h"
#include "tests/operator/controller/controller_fixture.h"
#include "tests/support/wait_for.h"

namespace kubetrain::controller {
namespace {

using ::testing::HasSubstr;
using testing_util::WaitFor;

constexpr char kGpus[] = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.";

class UnschedulableControllerTest : public ControllerFixture {
 protected:
  void StartJob(const std::string& name, const std::string& policy, int timeout_seconds = 1) {
    StartController();
    CreateJob(MakeJob(name, 0, 2,
                      Json{{"spec",
                            {{"runPolicy",
                              {{"schedulingTimeoutSeconds", timeout_seconds},
                               {"unschedulablePolicy", policy}}}}}}));
    ASSERT_TRUE(WaitForPods(name, 2));
    SetPodRunning(name + "-worker-0");
    // What kube-scheduler writes for a pod no node can take.
    PatchPodStatus(name + "-worker-1",
                   Json{{"phase", "Pending"},
                        {"conditions", Json::array({{{"type", "PodScheduled"},
                                                     {"status", "False"},
                                                     {"reason", "Unschedulable"},
                                                     {"message", kGpus}}})}});
  }
};

TEST_F(UnschedulableControllerTest, WaitNamesThePodUntilItIsScheduled) {
  StartJob("pend", "Wait");
  const absl::Time start = absl::Now();
  ASSERT_TRUE(WaitForCondition("pend", kCondUnschedulable, absl::Seconds(60)));
  // The requeue at the timeout brings it, not a resync (10 minutes): bounds
  // generous enough for a machine loaded by a whole parallel suite.
  EXPECT_LT(absl::Now() - start, absl::Seconds(60));
  // The condition carries the scheduler's message once the pod has it (on a
  // loaded machine the timeout may pass before the test writes it: the
  // condition then says "no scheduling decision yet" and is updated).
  const std::string want =
      "1 replica not scheduled within 1 s (runPolicy.schedulingTimeoutSeconds): worker-1 "
      "(pod pend-worker-1): " +
      std::string(kGpus);
  Json status;
  EXPECT_TRUE(WaitFor([&] {
    status = Status("pend");
    const Json* u = FindCondition(status, kCondUnschedulable);
    return u != nullptr && (*u)["message"] == want;
  })) << status.dump();
  const Json* c = FindCondition(status, kCondUnschedulable);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ((*c)["reason"], "SchedulingTimeout");
  EXPECT_EQ((*c)["message"], want);
  EXPECT_TRUE(WaitForEvent("pend", "Unschedulable"));
  EXPECT_FALSE(IsFinished(status));
  // A node frees up.
  SetPodRunning("pend-worker-1");
  ASSERT_TRUE(WaitFor([&] {
    const Json s = Status("pend");
    const Json* u = FindCondition(s, kCondUnschedulable);
    return u != nullptr && (*u)["status"] == "False" && (*u)["reason"] == "Scheduled";
  }));
  EXPECT_TRUE(WaitForCondition("pend", kCondRunning));
}

TEST_F(UnschedulableControllerTest, FailFailsTheJobNamingThePod) {
  // Failing is final, so the scheduler's message must be on the pod before
  // the timeout passes: 5 s leave a loaded machine time to write it.
  StartJob("pendf", "Fail", 5);
  ASSERT_TRUE(WaitForCondition("pendf", kCondFailed, absl::Seconds(60)));
  const Json status = Status("pendf");
  const Json* failed = FindCondition(status, kCondFailed);
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ((*failed)["reason"], "Unschedulable");
  EXPECT_THAT((*failed)["message"].get<std::string>(),
              HasSubstr("worker-1 (pod pendf-worker-1): 0/3 nodes are available"));
}

}  // namespace
}  // namespace kubetrain::controller
