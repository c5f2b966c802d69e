// The reconcile pass's phase and time decisions without an API server:
// activeDeadlineSeconds, ttlSecondsAfterFinished, a replica's phase from its
// pod, and every condition the job can move to.
#include "operator/controller/job_phase.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kubetrain::controller {
namespace {

using api::ReplicaPhase;
using api::ReplicaType;
using Kind = PhaseDecision::Kind;

const absl::Time kStart = absl::FromUnixSeconds(1767225600);

api::TrainingJob Job(int ps, int workers, int chiefs = 0) {
  api::TrainingJob job;
  job.metadata.name = "mnist";
  if (ps > 0) job.spec.replica_specs[ReplicaType::kPS].replicas = ps;
  if (workers > 0) job.spec.replica_specs[ReplicaType::kWorker].replicas = workers;
  if (chiefs > 0) job.spec.replica_specs[ReplicaType::kChief].replicas = chiefs;
  return job;
}

api::ReplicaState State(ReplicaType type, int index, ReplicaPhase phase) {
  api::ReplicaState s;
  s.type = type;
  s.index = index;
  s.phase = phase;
  s.name = "mnist-" + std::string(type == ReplicaType::kPS ? "ps" : "worker") + "-" +
           std::to_string(index);
  if (phase == ReplicaPhase::kSucceeded) s.last_exit = api::ReplicaExit::Code(0);
  if (phase == ReplicaPhase::kFailed) s.last_exit = api::ReplicaExit::Code(3);
  return s;
}

TEST(ActiveDeadline, NoDeadlineNoLimit) {
  const TimeLimit limit = ActiveDeadline(api::RunPolicy{}, kStart, kStart + absl::Hours(100));
  EXPECT_FALSE(limit.passed);
  EXPECT_FALSE(limit.wait.has_value());
}

TEST(ActiveDeadline, BeforeItWaitsTheRest) {
  api::RunPolicy policy;
  policy.active_deadline_seconds = 60;
  const TimeLimit limit = ActiveDeadline(policy, kStart, kStart + absl::Seconds(45));
  EXPECT_FALSE(limit.passed);
  EXPECT_EQ(limit.wait, absl::Seconds(15));
}

TEST(ActiveDeadline, PassesExactlyAtTheDeadline) {
  api::RunPolicy policy;
  policy.active_deadline_seconds = 60;
  EXPECT_EQ(ActiveDeadline(policy, kStart, kStart + absl::Seconds(60) - absl::Nanoseconds(1)).wait,
            absl::Nanoseconds(1));
  const TimeLimit at = ActiveDeadline(policy, kStart, kStart + absl::Seconds(60));
  EXPECT_TRUE(at.passed);
  EXPECT_FALSE(at.wait.has_value());
  EXPECT_TRUE(ActiveDeadline(policy, kStart, kStart + absl::Hours(1)).passed);
}

TEST(ActiveDeadline, MessageNamesJobAndSeconds) {
  EXPECT_EQ(DeadlineExceededMessage("mnist", 60),
            "TrainingJob mnist has run past its activeDeadlineSeconds (60 s)");
}

TEST(TtlAfterFinished, CountsFromCompletion) {
  api::RunPolicy policy;
  EXPECT_FALSE(TtlAfterFinished(policy, kStart, kStart + absl::Hours(1)).wait.has_value());
  EXPECT_FALSE(TtlAfterFinished(policy, kStart, kStart + absl::Hours(1)).passed);
  policy.ttl_seconds_after_finished = 600;
  EXPECT_EQ(TtlAfterFinished(policy, kStart, kStart + absl::Seconds(1)).wait, absl::Seconds(599));
  EXPECT_TRUE(TtlAfterFinished(policy, kStart, kStart + absl::Seconds(600)).passed);
  policy.ttl_seconds_after_finished = 0;  // at once
  EXPECT_TRUE(TtlAfterFinished(policy, kStart, kStart).passed);
}

TEST(ReplicaPhaseOf, EveryPodState) {
  EXPECT_EQ(ReplicaPhaseOf("", false, false), ReplicaPhase::kPending);   // no pod yet
  EXPECT_EQ(ReplicaPhaseOf("", false, true), ReplicaPhase::kSucceeded);  // completed, pod gone
  EXPECT_EQ(ReplicaPhaseOf("Pending", false, false), ReplicaPhase::kPending);
  EXPECT_EQ(ReplicaPhaseOf("Running", false, false), ReplicaPhase::kRunning);
  EXPECT_EQ(ReplicaPhaseOf("Running", true, false), ReplicaPhase::kPending);  // being deleted
  EXPECT_EQ(ReplicaPhaseOf("Succeeded", false, false), ReplicaPhase::kSucceeded);
  EXPECT_EQ(ReplicaPhaseOf("Succeeded", true, false), ReplicaPhase::kSucceeded);
  // A failed pod is the failure policy's (restart or fail the job), not a
  // phase of its own here.
  EXPECT_EQ(ReplicaPhaseOf("Failed", false, false), ReplicaPhase::kPending);
  EXPECT_EQ(ReplicaPhaseOf("Unknown", false, false), ReplicaPhase::kPending);
}

TEST(DecidePhase, PendingReplicasChangeNothing) {
  const PhaseDecision d = DecidePhase(Job(1, 2),
                                      {State(ReplicaType::kPS, 0, ReplicaPhase::kRunning),
                                       State(ReplicaType::kWorker, 0, ReplicaPhase::kRunning),
                                       State(ReplicaType::kWorker, 1, ReplicaPhase::kPending)},
                                      false);
  EXPECT_EQ(d.kind, Kind::kNone);
  EXPECT_EQ(d.reason, "");
}

TEST(DecidePhase, AllRunningIsRunning) {
  const PhaseDecision d = DecidePhase(Job(1, 2),
                                      {State(ReplicaType::kPS, 0, ReplicaPhase::kRunning),
                                       State(ReplicaType::kWorker, 0, ReplicaPhase::kRunning),
                                       State(ReplicaType::kWorker, 1, ReplicaPhase::kRunning)},
                                      false);
  EXPECT_EQ(d.kind, Kind::kRunning);
  EXPECT_EQ(d.reason, "JobRunning");
  EXPECT_EQ(d.message, "TrainingJob mnist is running.");
}

TEST(DecidePhase, SucceededReplicasDoNotHoldBackRunning) {
  // AllWorkers: worker 1 is done, the rest run; the job is still Running.
  api::TrainingJob job = Job(1, 2);
  job.spec.success_policy = api::SuccessPolicy::kAllWorkers;
  const PhaseDecision d = DecidePhase(job,
                                      {State(ReplicaType::kPS, 0, ReplicaPhase::kRunning),
                                       State(ReplicaType::kWorker, 0, ReplicaPhase::kRunning),
                                       State(ReplicaType::kWorker, 1, ReplicaPhase::kSucceeded)},
                                      false);
  EXPECT_EQ(d.kind, Kind::kRunning);
}

TEST(DecidePhase, NothingRunningIsNotRunning) {
  api::TrainingJob job = Job(0, 2);
  job.spec.success_policy = api::SuccessPolicy::kAllWorkers;
  const PhaseDecision d = DecidePhase(job,
                                      {State(ReplicaType::kWorker, 0, ReplicaPhase::kPending),
                                       State(ReplicaType::kWorker, 1, ReplicaPhase::kSucceeded)},
                                      false);
  EXPECT_EQ(d.kind, Kind::kNone);
}

TEST(DecidePhase, RestartingWinsOverRunning) {
  const PhaseDecision d = DecidePhase(Job(1, 1),
                                      {State(ReplicaType::kPS, 0, ReplicaPhase::kRunning),
                                       State(ReplicaType::kWorker, 0, ReplicaPhase::kRunning)},
                                      true);
  EXPECT_EQ(d.kind, Kind::kRestarting);
  EXPECT_EQ(d.reason, "JobRestarting");
  EXPECT_THAT(d.message, ::testing::HasSubstr("mnist is restarting"));
}

TEST(DecidePhase, WorkerZeroSucceededIsSucceededEvenWhileRestarting) {
  const PhaseDecision d = DecidePhase(Job(1, 2),
                                      {State(ReplicaType::kPS, 0, ReplicaPhase::kRunning),
                                       State(ReplicaType::kWorker, 0, ReplicaPhase::kSucceeded),
                                       State(ReplicaType::kWorker, 1, ReplicaPhase::kRunning)},
                                      true);
  EXPECT_EQ(d.kind, Kind::kSucceeded);
  EXPECT_EQ(d.reason, "JobSucceeded");
  EXPECT_EQ(d.message, "TrainingJob mnist successfully completed. worker 0 succeeded");
}

TEST(DecidePhase, ChiefDecidesWhenThereIsOne) {
  api::TrainingJob job = Job(0, 1, 1);
  std::vector<api::ReplicaState> states = {
      State(ReplicaType::kChief, 0, ReplicaPhase::kRunning),
      State(ReplicaType::kWorker, 0, ReplicaPhase::kSucceeded)};
  EXPECT_EQ(DecidePhase(job, states, false).kind, Kind::kRunning);
  states[0].phase = ReplicaPhase::kSucceeded;
  const PhaseDecision d = DecidePhase(job, states, false);
  EXPECT_EQ(d.kind, Kind::kSucceeded);
  EXPECT_THAT(d.message, ::testing::HasSubstr("the chief succeeded"));
}

TEST(DecidePhase, AllWorkersWaitsForEveryWorker) {
  api::TrainingJob job = Job(1, 2);
  job.spec.success_policy = api::SuccessPolicy::kAllWorkers;
  std::vector<api::ReplicaState> states = {State(ReplicaType::kPS, 0, ReplicaPhase::kRunning),
                                           State(ReplicaType::kWorker, 0, ReplicaPhase::kSucceeded),
                                           State(ReplicaType::kWorker, 1, ReplicaPhase::kRunning)};
  EXPECT_EQ(DecidePhase(job, states, false).kind, Kind::kRunning);
  states[2].phase = ReplicaPhase::kSucceeded;
  const PhaseDecision d = DecidePhase(job, states, false);
  EXPECT_EQ(d.kind, Kind::kSucceeded);
  EXPECT_THAT(d.message, ::testing::HasSubstr("all workers succeeded"));
}

TEST(DecidePhase, AFailedReplicaFailsTheJobBeforeAnythingElse) {
  const PhaseDecision d = DecidePhase(Job(1, 2),
                                      {State(ReplicaType::kPS, 0, ReplicaPhase::kRunning),
                                       State(ReplicaType::kWorker, 0, ReplicaPhase::kSucceeded),
                                       State(ReplicaType::kWorker, 1, ReplicaPhase::kFailed)},
                                      true);
  EXPECT_EQ(d.kind, Kind::kFailed);
  EXPECT_EQ(d.reason, "ReplicaFailed");
  EXPECT_THAT(d.message, ::testing::HasSubstr("mnist-worker-1"));
}

api::JobStatus StatusOf(const char* json) {
  absl::StatusOr<api::JobStatus> status = api::StatusFromJson(nlohmann::json::parse(json));
  EXPECT_TRUE(status.ok()) << status.status();
  return status.ok() ? *status : api::JobStatus{};
}

// What a later pass recomputes from the caches anyway may wait while the
// pass's creates are in flight; anything else is written at once.
TEST(StatusWriteCanWait, OnlyObservedCountsWait) {
  const api::JobStatus stored = StatusOf(R"({"restartCount": 0,
      "replicaStatuses": {"Worker": {"active": 0, "ready": 0, "succeeded": 0, "failed": 0,
                                     "restarts": 0, "selector": ""}}})");
  // A new job's first counts: Created, startTime, active, ready, selector.
  const api::JobStatus observed = StatusOf(R"({
      "conditions": [{"type": "Created", "status": "True", "reason": "TrainingJobCreated"}],
      "startTime": "2026-11-22T00:00:00Z", "lastReconcileTime": "2026-11-22T00:00:01Z",
      "replicaStatuses": {"Worker": {"active": 2, "ready": 1, "selector": "s"},
                          "PS": {"active": 1}}})");
  EXPECT_TRUE(StatusWriteCanWait(stored, observed));
  EXPECT_TRUE(StatusWriteCanWait(api::JobStatus{}, observed));

  for (const char* lasting : {
           R"({"conditions": [{"type": "Running", "status": "True"}]})",
           R"({"restartCount": 1})",
           R"({"disruptionCount": 1})",
           R"({"completionTime": "2026-11-22T00:00:00Z"})",
           R"({"replicaStatuses": {"Worker": {"succeeded": 1}}})",
           R"({"replicaStatuses": {"Worker": {"failed": 1}}})",
           R"({"replicaStatuses": {"Worker": {"restarts": 1}}})",
           R"({"replicaStatuses": {"Worker": {"completedIndexes": [0]}}})",
           R"({"lastFailure": {"pod": "p", "reason": "Error"}})",
       }) {
    EXPECT_FALSE(StatusWriteCanWait(stored, StatusOf(lasting))) << lasting;
  }
}

}  // namespace
}  // namespace kubetrain::controller
