#include "api/replica_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <vector>

namespace kubetrain::api {
namespace {

using ::testing::HasSubstr;

constexpr ExitAction kR = ExitAction::kRestart;
constexpr ExitAction kC = ExitAction::kComplete;
constexpr ExitAction kF = ExitAction::kFailJob;

struct Row {
  ReplicaExit exit;
  ExitAction always, on_failure, exit_code, never;
};

TEST(DecideOnExitTest, EveryPolicyAndExitClass) {
  const std::vector<Row> rows = {
      {ReplicaExit::Code(0), kR, kC, kC, kC},
      {ReplicaExit::Code(1), kR, kR, kF, kF},
      {ReplicaExit::Code(3), kR, kR, kF, kF},
      {ReplicaExit::Code(127), kR, kR, kF, kF},
      {ReplicaExit::Code(128), kR, kR, kR, kF},
      {ReplicaExit::Code(130), kR, kR, kR, kF},
      {ReplicaExit::Code(137), kR, kR, kR, kF},
      {ReplicaExit::Code(143), kR, kR, kR, kF},
      {ReplicaExit::Code(255), kR, kR, kR, kF},
      {ReplicaExit::Signal(SIGKILL), kR, kR, kR, kF},
      {ReplicaExit::Signal(SIGTERM), kR, kR, kR, kF},
      {ReplicaExit::Signal(SIGSEGV), kR, kR, kR, kF},
      {ReplicaExit::Signal(SIGINT), kR, kR, kR, kF},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.exit.Describe());
    EXPECT_EQ(DecideOnExit(RestartPolicy::kAlways, r.exit), r.always);
    EXPECT_EQ(DecideOnExit(RestartPolicy::kOnFailure, r.exit), r.on_failure);
    EXPECT_EQ(DecideOnExit(RestartPolicy::kExitCode, r.exit), r.exit_code);
    EXPECT_EQ(DecideOnExit(RestartPolicy::kNever, r.exit), r.never);
  }
  // Exhaustively over every exit code: ExitCode splits at 128.
  for (int code = 0; code <= 255; ++code) {
    const ExitAction want = code == 0 ? kC : (code >= 128 ? kR : kF);
    EXPECT_EQ(DecideOnExit(RestartPolicy::kExitCode, ReplicaExit::Code(code)), want) << code;
    EXPECT_EQ(DecideOnExit(RestartPolicy::kOnFailure, ReplicaExit::Code(code)), code ? kR : kC);
    EXPECT_EQ(DecideOnExit(RestartPolicy::kNever, ReplicaExit::Code(code)), code ? kF : kC);
    EXPECT_EQ(DecideOnExit(RestartPolicy::kAlways, ReplicaExit::Code(code)), kR);
  }
  for (int sig = 1; sig < 32; ++sig) {
    EXPECT_EQ(DecideOnExit(RestartPolicy::kExitCode, ReplicaExit::Signal(sig)), kR) << sig;
  }
}

// Where ExitCode agrees with Kubeflow's documented table and where it
// differs on purpose (replica_policy.h, the CRD's restartPolicy description).
TEST(ReplicaPolicyTest, ExitCodeAgainstKubeflowsDocumentedTable) {
  // Kubeflow documents these as retryable; so are they here.
  for (int code : {130, 137, 138, 143}) {
    EXPECT_EQ(DecideOnExit(RestartPolicy::kExitCode, ReplicaExit::Code(code)), ExitAction::kRestart)
        << code;
  }
  // Kubeflow documents these as permanent; so are they here.
  for (int code : {1, 2, 126, 127}) {
    EXPECT_EQ(DecideOnExit(RestartPolicy::kExitCode, ReplicaExit::Code(code)), ExitAction::kFailJob)
        << code;
  }
  // Differences: 128 and 139 (SIGSEGV) are permanent in Kubeflow's table and
  // retried here, as is 129, the runtime's lost-peer exit.
  for (int code : {128, 129, 139}) {
    EXPECT_EQ(DecideOnExit(RestartPolicy::kExitCode, ReplicaExit::Code(code)), ExitAction::kRestart)
        << code;
  }
  EXPECT_EQ(DecideOnExit(RestartPolicy::kExitCode, ReplicaExit::Signal(SIGSEGV)),
            ExitAction::kRestart);
}

TEST(ReplicaExitTest, EffectiveCodeAndDescription) {
  EXPECT_EQ(ReplicaExit::Signal(SIGKILL).EffectiveCode(), 137);
  EXPECT_EQ(ReplicaExit::Code(3).EffectiveCode(), 3);
  EXPECT_TRUE(ReplicaExit::Code(0).Succeeded());
  EXPECT_FALSE(ReplicaExit::Signal(SIGTERM).Succeeded());
  EXPECT_EQ(ReplicaExit::Code(3).Describe(), "exited with code 3");
  EXPECT_EQ(ReplicaExit::Signal(SIGKILL).Describe(), "killed by signal 9 (SIGKILL)");
  EXPECT_TRUE(IsRetryableExitCode(128));
  EXPECT_FALSE(IsRetryableExitCode(127));
  EXPECT_EQ(ExitActionName(ExitAction::kFailJob), "FailJob");
}

ReplicaState State(ReplicaType t, int i, ReplicaPhase p) {
  ReplicaState s;
  s.type = t;
  s.index = i;
  s.phase = p;
  return s;
}

constexpr ReplicaType kPS = ReplicaType::kPS;
constexpr ReplicaType kW = ReplicaType::kWorker;
constexpr ReplicaType kChief = ReplicaType::kChief;
constexpr ReplicaType kEval = ReplicaType::kEvaluator;
constexpr ReplicaPhase kRun = ReplicaPhase::kRunning;
constexpr ReplicaPhase kOk = ReplicaPhase::kSucceeded;
constexpr ReplicaPhase kBad = ReplicaPhase::kFailed;
constexpr ReplicaPhase kRestarting = ReplicaPhase::kRestarting;

TEST(DecideJobOutcomeTest, DefaultPolicyWorkerZeroDecides) {
  const SuccessPolicy d = SuccessPolicy::kDefault;
  EXPECT_EQ(
      DecideJobOutcome(d, false, {State(kPS, 0, kRun), State(kW, 0, kRun), State(kW, 1, kRun)})
          .phase,
      JobPhase::kRunning);
  EXPECT_EQ(DecideJobOutcome(d, false, {State(kPS, 0, kRun), State(kW, 0, kOk), State(kW, 1, kRun)})
                .phase,
            JobPhase::kSucceeded);
  EXPECT_EQ(DecideJobOutcome(d, false, {State(kPS, 0, kRun), State(kW, 0, kRun), State(kW, 1, kOk)})
                .phase,
            JobPhase::kRunning);
  EXPECT_EQ(DecideJobOutcome(d, false, {State(kW, 0, kRestarting), State(kW, 1, kOk)}).phase,
            JobPhase::kRunning);
  // PS and evaluator never decide success.
  EXPECT_EQ(
      DecideJobOutcome(d, false, {State(kPS, 0, kOk), State(kEval, 0, kOk), State(kW, 0, kRun)})
          .phase,
      JobPhase::kRunning);
}

TEST(DecideJobOutcomeTest, DefaultPolicyChiefDecides) {
  const SuccessPolicy d = SuccessPolicy::kDefault;
  EXPECT_EQ(DecideJobOutcome(d, true, {State(kChief, 0, kRun), State(kW, 0, kOk)}).phase,
            JobPhase::kRunning);
  const JobOutcome o = DecideJobOutcome(d, true, {State(kChief, 0, kOk), State(kW, 0, kRun)});
  EXPECT_EQ(o.phase, JobPhase::kSucceeded);
  EXPECT_EQ(o.message, "the chief succeeded");
}

TEST(DecideJobOutcomeTest, AllWorkers) {
  const SuccessPolicy a = SuccessPolicy::kAllWorkers;
  EXPECT_EQ(DecideJobOutcome(a, false, {State(kPS, 0, kRun), State(kW, 0, kOk), State(kW, 1, kRun)})
                .phase,
            JobPhase::kRunning);
  EXPECT_EQ(
      DecideJobOutcome(a, false, {State(kPS, 0, kRun), State(kW, 0, kOk), State(kW, 1, kOk)}).phase,
      JobPhase::kSucceeded);
  EXPECT_EQ(DecideJobOutcome(a, true, {State(kChief, 0, kRun), State(kW, 0, kOk)}).phase,
            JobPhase::kRunning);
  EXPECT_EQ(
      DecideJobOutcome(a, true, {State(kChief, 0, kOk), State(kW, 0, kOk), State(kEval, 0, kRun)})
          .phase,
      JobPhase::kSucceeded);
}

TEST(DecideJobOutcomeTest, AnyFailedReplicaFailsTheJob) {
  for (SuccessPolicy p : {SuccessPolicy::kDefault, SuccessPolicy::kAllWorkers}) {
    for (ReplicaType failing : {kPS, kW, kEval}) {
      ReplicaState bad = State(failing, failing == kW ? 1 : 0, kBad);
      bad.last_exit = ReplicaExit::Code(3);
      bad.name = "job-x-1";
      const JobOutcome o = DecideJobOutcome(p, false, {State(kW, 0, kOk), bad});
      EXPECT_EQ(o.phase, JobPhase::kFailed);
      EXPECT_EQ(o.reason, "ReplicaFailed");
      EXPECT_EQ(o.message, "job-x-1 exited with code 3");
    }
  }
  ReplicaState unnamed = State(kW, 1, kBad);
  unnamed.last_exit = ReplicaExit::Signal(SIGKILL);
  EXPECT_THAT(DecideJobOutcome(SuccessPolicy::kDefault, false, {unnamed}).message,
              HasSubstr("Worker replica 1 killed by signal 9"));
}

TEST(BackoffLimitTest, CountsRestartsAcrossReplicas) {
  RunPolicy none;
  EXPECT_FALSE(ExceedsBackoffLimit(none, 1000));
  RunPolicy two;
  two.backoff_limit = 2;
  EXPECT_FALSE(ExceedsBackoffLimit(two, 1));
  EXPECT_FALSE(ExceedsBackoffLimit(two, 2));
  EXPECT_TRUE(ExceedsBackoffLimit(two, 3));
  RunPolicy zero;
  zero.backoff_limit = 0;
  EXPECT_TRUE(ExceedsBackoffLimit(zero, 1));
}

}  // namespace
}  // namespace kubetrain::api
