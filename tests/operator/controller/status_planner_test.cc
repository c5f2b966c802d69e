// The status a pass derives from the pods: replica counts, replica states
// for the phase decision, lastFailure.
#include "operator/controller/status_planner.h"

#include <gtest/gtest.h>

#include "operator/kube/object.h"
#include "tests/operator/controller/planner_test_objects.h"

namespace kubetrain::controller {
namespace {

using namespace testing_objects;  // NOLINT(build/namespaces)
using api::ReplicaType;

TEST(StatusPlannerTest, ReplicaStatusesCountThePods) {
  const api::TrainingJob job = Job(1, 4);
  ReplicaObjects pods;
  pods[{ReplicaType::kPS, 0}] = Pod("ps", 0, {.ready = true});
  pods[{ReplicaType::kWorker, 0}] = Pod("worker", 0, {.phase = "Succeeded"});
  pods[{ReplicaType::kWorker, 1}] = Pod("worker", 1, {.phase = "Failed"});
  pods[{ReplicaType::kWorker, 2}] = Pod("worker", 2, {.ready = true, .deleting = true});
  pods[{ReplicaType::kWorker, 3}] = Pod("worker", 3, {.phase = "Pending"});
  api::JobStatus status;
  status.replica_statuses[ReplicaType::kWorker].restarts = 2;
  status.replica_statuses[ReplicaType::kWorker].completed_indexes = {3};  // from earlier
  status.replica_statuses[ReplicaType::kWorker].active = 9;               // stale

  ComputeReplicaStatuses(job, pods, status);
  const api::ReplicaStatus& ps = status.replica_statuses.at(ReplicaType::kPS);
  EXPECT_EQ(ps.active, 1);
  EXPECT_EQ(ps.ready, 1);
  EXPECT_EQ(ps.selector, "kubetrain.io/job-name=j,kubetrain.io/replica-type=ps");
  const api::ReplicaStatus& w = status.replica_statuses.at(ReplicaType::kWorker);
  EXPECT_EQ(w.active, 1);  // worker-3: Pending counts; worker-2 is going
  EXPECT_EQ(w.ready, 0);
  EXPECT_EQ(w.failed, 1);
  EXPECT_EQ(w.succeeded, 2);
  EXPECT_EQ(w.completed_indexes, (std::set<int32_t>{0, 3}));
  EXPECT_EQ(w.restarts, 2);  // kept: counted by the failure policy
  EXPECT_EQ(w.selector, "kubetrain.io/job-name=j,kubetrain.io/replica-type=worker");

  // The JSON clients see for it.
  EXPECT_EQ(api::StatusToJson(status)["replicaStatuses"]["Worker"],
            Json::parse(R"({"active": 1, "ready": 0, "succeeded": 2, "failed": 1, "restarts": 2,
                            "completedIndexes": [0, 3],
                            "selector": "kubetrain.io/job-name=j,kubetrain.io/replica-type=worker"})"));
}

TEST(StatusPlannerTest, ReplicaStatesForThePhaseDecision) {
  const api::TrainingJob job = Job(1, 3);
  ReplicaObjects pods;
  pods[{ReplicaType::kPS, 0}] = Pod("ps", 0);
  pods[{ReplicaType::kWorker, 0}] = Pod("worker", 0, {.phase = "Succeeded"});
  pods[{ReplicaType::kWorker, 1}] = Pod("worker", 1, {.deleting = true});
  api::JobStatus status;
  status.replica_statuses[ReplicaType::kWorker].completed_indexes = {2};
  const std::vector<api::ReplicaState> states = ReplicaStates(job, pods, status);
  ASSERT_EQ(states.size(), 4u);
  EXPECT_EQ(states[0].type, ReplicaType::kPS);
  EXPECT_EQ(states[0].name, "j-ps-0");
  EXPECT_EQ(states[0].phase, api::ReplicaPhase::kRunning);
  EXPECT_EQ(states[1].phase, api::ReplicaPhase::kSucceeded);
  ASSERT_TRUE(states[1].last_exit.has_value());
  EXPECT_EQ(states[1].last_exit->EffectiveCode(), 0);
  EXPECT_EQ(states[2].phase, api::ReplicaPhase::kPending);  // being deleted
  EXPECT_EQ(states[3].index, 2);
  EXPECT_EQ(states[3].phase, api::ReplicaPhase::kSucceeded);  // completed, pod gone
}

FailedReplica Failure(const std::string& pod, const std::string& uid, api::FailureReason reason) {
  FailedReplica f;
  f.type = ReplicaType::kWorker;
  f.index = 1;
  f.pod_name = pod;
  f.pod_uid = uid;
  f.node = "node-b";
  f.exit = api::ReplicaExit::Code(1);
  f.reason = reason;
  f.message = "kubetrain: error: bad flag";
  return f;
}

TEST(StatusPlannerTest, LastFailureIsRecordedOncePerPodAndReason) {
  api::JobStatus status;
  const FailedReplica f = Failure("j-worker-1", "uid-1", api::FailureReason::kConfigError);
  EXPECT_TRUE(RecordLastFailure(status, f, "2026-11-22T00:00:00Z"));
  EXPECT_EQ(api::StatusToJson(status)["lastFailure"],
            Json::parse(R"({"replicaType": "Worker", "replicaIndex": 1, "pod": "j-worker-1",
                            "podUID": "uid-1", "node": "node-b", "exitCode": 1,
                            "reason": "ConfigError", "message": "kubetrain: error: bad flag",
                            "time": "2026-11-22T00:00:00Z"})"));
  // The same pod, the same reason: reported already, the time stays.
  EXPECT_FALSE(RecordLastFailure(status, f, "2026-11-22T00:01:00Z"));
  EXPECT_EQ(status.last_failure->time, "2026-11-22T00:00:00Z");
  // Another reason, or a new pod of the same name, is news.
  EXPECT_TRUE(RecordLastFailure(status, Failure("j-worker-1", "uid-1", api::FailureReason::kError),
                                "2026-11-22T00:02:00Z"));
  EXPECT_TRUE(RecordLastFailure(status, Failure("j-worker-1", "uid-2", api::FailureReason::kError),
                                "2026-11-22T00:03:00Z"));
  EXPECT_EQ(status.last_failure->pod_uid, "uid-2");
}

TEST(StatusPlannerTest, AFailureWithoutAnExitHasNoExitCode) {
  api::JobStatus status;
  FailedReplica f = Failure("j-worker-1", "", api::FailureReason::kNodeLost);
  f.state = "was lost with its node";
  EXPECT_TRUE(RecordLastFailure(status, f, "2026-11-22T00:00:00Z"));
  const Json last = api::StatusToJson(status)["lastFailure"];
  EXPECT_FALSE(last.contains("exitCode"));
  EXPECT_FALSE(last.contains("podUID"));
  EXPECT_EQ(last["reason"], "NodeLost");
}

// Replica `type`-`index` of job "j" whose container ended with `message`.
kube::ObjectPtr Stopped(const std::string& type, int index, const std::string& message,
                        const char* which = "state") {
  Json pod = *Pod(type, index, {.phase = "Failed"});
  pod["status"]["containerStatuses"] = Json::array(
      {{{"name", "c"},
        {which,
         {{"terminated", {{"exitCode", 143}, {"reason", "Error"}, {"message", message}}}}}}});
  return std::make_shared<const Json>(std::move(pod));
}

TEST(StatusPlannerTest, LastCheckpointIsTheNewestStepAStoppedReplicaReported) {
  api::JobStatus status;
  ReplicaObjects pods;
  pods[{ReplicaType::kPS, 0}] =
      Stopped("ps", 0, "kubetrain: checkpoint step=40 path=/ckpt/ps-0/ckpt-40");
  pods[{ReplicaType::kPS, 1}] =
      Stopped("ps", 1, "kubetrain: checkpoint step=41 path=/ckpt/ps-1/ckpt-41", "lastState");
  pods[{ReplicaType::kWorker, 0}] = Stopped("worker", 0, "kubetrain: error: worker-0: bad flag");
  pods[{ReplicaType::kWorker, 1}] = Pod("worker", 1);
  EXPECT_TRUE(RecordStoppedPodCheckpoints(status, pods, "2026-11-22T00:00:00Z"));
  EXPECT_EQ(api::StatusToJson(status)["lastCheckpoint"],
            Json::parse(R"({"step": 41, "replica": "ps-1", "path": "/ckpt/ps-1/ckpt-41",
                            "time": "2026-11-22T00:00:00Z"})"));
  // Seen again: nothing changes, the time stays.
  EXPECT_FALSE(RecordStoppedPodCheckpoints(status, pods, "2026-11-22T00:01:00Z"));
  EXPECT_EQ(status.last_checkpoint->time, "2026-11-22T00:00:00Z");
  // An older step never replaces a newer one; a newer one does.
  EXPECT_FALSE(RecordLastCheckpoint(status, "worker-0", {12, "/old"}, "2026-11-22T00:02:00Z"));
  EXPECT_TRUE(RecordLastCheckpoint(status, "worker-0", {1200, "/new"}, "2026-11-22T00:03:00Z"));
  EXPECT_EQ(*status.last_checkpoint,
            (api::LastCheckpoint{1200, "worker-0", "/new", "2026-11-22T00:03:00Z"}));
}

TEST(StatusPlannerTest, ASuspendedJobWaitsForItsPodsWithinTheirGracePeriod) {
  const absl::Time now = absl::FromUnixSeconds(1795305600);  // 2026-11-22T00:00:00Z
  ReplicaObjects pods;
  pods[{ReplicaType::kPS, 0}] = Pod("ps", 0, {.phase = "Failed"});
  pods[{ReplicaType::kWorker, 0}] = Pod("worker", 0, {.phase = "Succeeded"});
  EXPECT_TRUE(PodsStillStopping(pods, now).pods.empty()) << "ended pods are waited for by no one";
  // Running, its deletion only planned: waited for, no deadline known yet.
  pods[{ReplicaType::kWorker, 1}] = Pod("worker", 1);
  // Being deleted until 00:00:20: waited for, 20 s at most.
  Json deleting = *Pod("worker", 2, {.deleting = true});
  deleting["metadata"]["deletionTimestamp"] = "2026-11-22T00:00:20Z";
  pods[{ReplicaType::kWorker, 2}] = std::make_shared<const Json>(deleting);
  // Past the end of its grace period (Pod's deletionTimestamp is 00:00:00):
  // the node-loss check's, not waited for.
  pods[{ReplicaType::kWorker, 3}] = Pod("worker", 3, {.deleting = true});
  const SuspendWait wait = PodsStillStopping(pods, now);
  EXPECT_EQ(wait.pods, (std::vector<std::string>{"j-worker-1", "j-worker-2"}));
  ASSERT_TRUE(wait.wait.has_value());
  EXPECT_EQ(*wait.wait, absl::Seconds(20));
}

}  // namespace
}  // namespace kubetrain::controller
