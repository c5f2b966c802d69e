// Replicas on a lost node, end to end against the API emulator (or a real
// cluster with KUBETRAIN_TEST_KUBECONFIG): the test plays the kubelet and
// the node lifecycle controller. A node whose Ready condition turned
// Unknown (as kube-controller-manager sets it once the kubelet stops
// heartbeating) for runPolicy.nodeLostTimeoutSeconds gets its replica
// force-deleted and recreated, a NodeLost disruption not counted toward
// backoffLimit; a pod left Terminating past its grace period (no kubelet
// to confirm) is force-deleted too; a replica whose Node is gone is lost at
// once; a pod the control plane deletes for a disruption (DisruptionTarget)
// is named once while it terminates.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "operator/controller/job_status.h"
#include "operator/kube/api_error.h"
#include "operator/kube/object.h"
#include "operator/kube/resource.h"
#include "tests/operator/controller/controller_fixture.h"
#include "tests/support/wait_for.h"

namespace kubetrain::controller {
namespace {

using ::testing::HasSubstr;
using testing_util::WaitFor;

class NodeLostControllerTest : public ControllerFixture {
 protected:
  void TearDown() override {
    for (const std::string& node : nodes_) {
      (void)client().Delete(kube::kNodes, "", node, kube::DeleteOptions{});
    }
    ControllerFixture::TearDown();
  }

  // A Node (cluster-scoped: named after the test's namespace) whose Ready
  // condition is `ready`, since `since`.
  std::string MakeNode(const std::string& suffix) {
    const std::string name = absl::StrCat(ns(), "-", suffix);
    absl::StatusOr<Json> created = client().Create(
        kube::kNodes, "",
        Json{{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}}}});
    EXPECT_TRUE(created.ok()) << created.status();
    nodes_.push_back(name);
    SetReady(name, "True", "KubeletReady", "kubelet is posting ready status", absl::Now());
    return name;
  }
  void SetReady(const std::string& node, const std::string& status, const std::string& reason,
                const std::string& message, absl::Time since) {
    const std::string t = kube::FormatTime(absl::ToUnixMicros(since));
    Json ready{{"type", "Ready"},    {"status", status},       {"reason", reason},
               {"message", message}, {"lastHeartbeatTime", t}, {"lastTransitionTime", t}};
    absl::StatusOr<Json> patched = client().MergePatch(
        kube::kNodes, "", node, Json{{"status", {{"conditions", Json::array({ready})}}}}, "status");
    ASSERT_TRUE(patched.ok()) << patched.status();
  }
  // What the scheduler does: pods/binding.
  void Bind(const std::string& pod, const std::string& node) {
    const Json binding{{"apiVersion", "v1"},
                       {"kind", "Binding"},
                       {"metadata", {{"name", pod}, {"namespace", ns()}}},
                       {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
    absl::StatusOr<Json> bound =
        client().CreateSubresource(kube::kPods, ns(), pod, "binding", binding);
    ASSERT_TRUE(bound.ok()) << bound.status();
  }
  // A 2-worker job, worker-i Running on nodes[i]; backoffLimit 0, so a
  // counted restart would fail it.
  void StartJob(const std::string& job, const std::vector<std::string>& nodes) {
    StartController();
    CreateJob(
        MakeJob(job, 0, 2,
                Json{{"spec",
                      {{"replicaSpecs", {{"Worker", {{"restartPolicy", "ExitCode"}}}}},
                       {"runPolicy", {{"backoffLimit", 0}, {"nodeLostTimeoutSeconds", 2}}}}}}));
    ASSERT_TRUE(WaitForPods(job, 2));
    for (int i = 0; i < 2; ++i) {
      const std::string pod = absl::StrCat(job, "-worker-", i);
      Bind(pod, nodes[i]);
      SetPodRunning(pod);
    }
    ASSERT_TRUE(WaitForCondition(job, kCondRunning));
  }
  bool Recreated(const std::string& job, const std::string& pod, const std::string& old_uid) {
    return WaitFor(
        [&] {
          auto pods = Pods(job);
          return pods.count(pod) && kube::Uid(pods[pod]) != old_uid;
        },
        absl::Seconds(60));
  }

  std::vector<std::string> nodes_;
};

TEST_F(NodeLostControllerTest, AReplicaOnANodeNotReadyTooLongIsRecreatedNotCounted) {
  const std::string a = MakeNode("a"), b = MakeNode("b");
  StartJob("nl", {a, b});
  const std::string w0 = kube::Uid(Pods("nl")["nl-worker-0"]);
  const std::string w1 = kube::Uid(Pods("nl")["nl-worker-1"]);
  // node b's kubelet stops heartbeating; the node lifecycle controller says so.
  const absl::Time lost_at = absl::Now();
  SetReady(b, "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.", lost_at);
  ASSERT_TRUE(Recreated("nl", "nl-worker-1", w1));
  // The requeue for the timeout brought it, neither before nor at a resync.
  const absl::Duration took = absl::Now() - lost_at;
  EXPECT_GE(took, absl::Seconds(1)) << "the 2 s timeout (whole seconds) was not waited for";
  EXPECT_LT(took, absl::Seconds(60)) << "not the resync (10 minutes)";
  EXPECT_EQ(kube::Uid(Pods("nl")["nl-worker-0"]), w0) << "the survivor on node a stays";
  ASSERT_TRUE(WaitFor([&] { return Status("nl").value("disruptionCount", 0) == 1; }));
  const Json status = Status("nl");
  EXPECT_EQ(status.value("restartCount", 0), 0) << "not counted toward backoffLimit 0";
  EXPECT_FALSE(IsFinished(status));
  const Json& last = status["lastFailure"];
  EXPECT_EQ(last["reason"], "NodeLost");
  EXPECT_EQ(last["pod"], "nl-worker-1");
  EXPECT_EQ(last["node"], b);
  EXPECT_THAT(last["message"].get<std::string>(),
              HasSubstr(absl::StrCat("node ", b, " has not been Ready for ")));
  EXPECT_THAT(
      last["message"].get<std::string>(),
      HasSubstr("(Ready=Unknown, NodeStatusUnknown): Kubelet stopped posting node status."));
  EXPECT_TRUE(WaitForEvent("nl", "NodeLost"));
  EXPECT_TRUE(WaitFor([&] { return metrics_.Get("failure:NodeLost") == 1; }));
}

TEST_F(NodeLostControllerTest, AReplicaWhoseNodeIsGoneIsRecreated) {
  const std::string a = MakeNode("a"), c = MakeNode("c");
  StartJob("ng", {a, c});
  const std::string w1 = kube::Uid(Pods("ng")["ng-worker-1"]);
  ASSERT_TRUE(client().Delete(kube::kNodes, "", c, kube::DeleteOptions{}).ok());
  ASSERT_TRUE(Recreated("ng", "ng-worker-1", w1));
  const Json status = Status("ng");
  EXPECT_EQ(status["lastFailure"]["reason"], "NodeLost");
  EXPECT_THAT(status["lastFailure"]["message"].get<std::string>(),
              HasSubstr(absl::StrCat("node ", c, " is gone")));
  EXPECT_EQ(status.value("restartCount", 0), 0);
}

TEST_F(NodeLostControllerTest, APodStuckTerminatingIsForceDeleted) {
  const std::string a = MakeNode("a"), b = MakeNode("b");
  StartJob("st", {a, b});
  const std::string w0 = kube::Uid(Pods("st")["st-worker-0"]);
  // Someone (the taint manager, a drain) deletes it with a grace period; no
  // kubelet ever confirms, so it stays Terminating.
  kube::DeleteOptions graceful;
  graceful.grace_period_seconds = 1;
  ASSERT_TRUE(client().Delete(kube::kPods, ns(), "st-worker-0", graceful).ok());
  ASSERT_TRUE(WaitFor([&] {
    auto pods = Pods("st", /*all=*/true);
    return pods.count("st-worker-0") && kube::IsBeingDeleted(pods["st-worker-0"]);
  }));
  // Past its grace period (1 s) plus nodeLostTimeoutSeconds (2 s) it is
  // force-deleted, and the replica recreated.
  ASSERT_TRUE(Recreated("st", "st-worker-0", w0));
  EXPECT_TRUE(WaitForEvent("st", "ForceDeleted"));
  const Json status = Status("st");
  EXPECT_EQ(status.value("restartCount", 0), 0);
  EXPECT_FALSE(IsFinished(status));
}

// The control plane's own deletion for a disruption: kube-scheduler's
// preemption sets DisruptionTarget and deletes the victim with its grace
// period. While it terminates the operator names it once (Preempted, a
// disruption), and recreates the replica when the kubelet has finished.
TEST_F(NodeLostControllerTest, APreemptedPodBeingDeletedIsNamedOnceAndRecreated) {
  const std::string a = MakeNode("a"), b = MakeNode("b");
  StartJob("pre", {a, b});
  const std::string w1 = kube::Uid(Pods("pre")["pre-worker-1"]);
  PatchPodStatus("pre-worker-1",
                 Json{{"conditions", Json::array({{{"type", "DisruptionTarget"},
                                                   {"status", "True"},
                                                   {"reason", "PreemptionByScheduler"},
                                                   {"message",
                                                    "kube-scheduler: preempting to accommodate a "
                                                    "higher priority pod"}}})}});
  kube::DeleteOptions graceful;
  graceful.grace_period_seconds = 30;
  ASSERT_TRUE(client().Delete(kube::kPods, ns(), "pre-worker-1", graceful).ok());
  ASSERT_TRUE(WaitFor([&] { return Status("pre").value("disruptionCount", 0) == 1; }));
  Json status = Status("pre");
  EXPECT_EQ(status["lastFailure"]["reason"], "Preempted");
  EXPECT_EQ(status["lastFailure"]["podUID"], w1);
  EXPECT_THAT(status["lastFailure"]["message"].get<std::string>(), HasSubstr("preempting"));
  EXPECT_EQ(status.value("restartCount", 0), 0);
  EXPECT_TRUE(WaitForEvent("pre", "Preempted"));
  // Later passes while it terminates do not count it again.
  SetPodRunning("pre-worker-0");
  ASSERT_TRUE(WaitFor([&] { return plans_.Idle(); }));
  EXPECT_EQ(Status("pre").value("disruptionCount", 0), 1);
  // The kubelet finishes; the replica comes back.
  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  ASSERT_TRUE(client().Delete(kube::kPods, ns(), "pre-worker-1", now).ok());
  ASSERT_TRUE(Recreated("pre", "pre-worker-1", w1));
  EXPECT_EQ(Status("pre").value("disruptionCount", 0), 1);
  EXPECT_EQ(Status("pre").value("restartCount", 0), 0);
}

}  // namespace
}  // namespace kubetrain::controller
