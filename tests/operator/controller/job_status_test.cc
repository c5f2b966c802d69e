// Every condition transition of a TrainingJob's status, without an API
// server: Created -> Running <-> Restarting -> Succeeded | Failed, Suspended,
// the timestamps, the order that makes the last True condition the phase.
#include "operator/controller/job_status.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kubetrain::controller {
namespace {

constexpr char kT0[] = "2026-11-24T00:00:00Z";
constexpr char kT1[] = "2026-11-24T00:00:01Z";
constexpr char kT2[] = "2026-11-24T00:00:02Z";

using api::JobStatus;

std::vector<std::string> Types(const JobStatus& status) {
  std::vector<std::string> out;
  for (const api::Condition& c : status.conditions) out.push_back(c.type);
  return out;
}

std::string StatusOf(const JobStatus& status, const std::string& type) {
  const api::Condition* c = FindCondition(status, type);
  return c == nullptr ? "absent" : api::ConditionStatusName(c->status);
}

TEST(JobStatusTest, EmptyStatusHasNoPhase) {
  JobStatus status;
  EXPECT_EQ(Phase(status), "");
  EXPECT_FALSE(IsFinished(status));
  EXPECT_EQ(FindCondition(status, kCondRunning), nullptr);
  // Turning off a condition that was never set writes nothing.
  SetCondition(status, kCondRunning, false, "X", "", kT0);
  EXPECT_EQ(status, JobStatus{});
}

TEST(JobStatusTest, CreatedThenRunning) {
  JobStatus status;
  SetCondition(status, kCondCreated, true, "JobCreated", "created", kT0);
  EXPECT_EQ(Phase(status), kCondCreated);
  SetCondition(status, kCondRunning, true, "JobRunning", "running", kT1);
  EXPECT_EQ(Phase(status), kCondRunning);
  EXPECT_EQ(Types(status), (std::vector<std::string>{kCondCreated, kCondRunning}));
  EXPECT_TRUE(IsConditionTrue(status, kCondCreated));
  EXPECT_FALSE(IsFinished(status));
}

TEST(JobStatusTest, RunningAndRestartingTurnEachOtherOff) {
  JobStatus status;
  SetCondition(status, kCondRunning, true, "JobRunning", "", kT0);
  SetCondition(status, kCondRestarting, true, "JobRestarting", "worker-1 exited 137", kT1);
  EXPECT_EQ(Phase(status), kCondRestarting);
  EXPECT_EQ(StatusOf(status, kCondRunning), "False");
  EXPECT_EQ(FindCondition(status, kCondRunning)->reason, "JobRestarting");
  SetCondition(status, kCondRunning, true, "JobRunning", "", kT2);
  EXPECT_EQ(Phase(status), kCondRunning);
  EXPECT_EQ(StatusOf(status, kCondRestarting), "False");
  EXPECT_EQ(FindCondition(status, kCondRestarting)->reason, "JobRunning");
  // The True condition moved to the end: the printer column shows it.
  EXPECT_EQ(Types(status).back(), kCondRunning);
}

TEST(JobStatusTest, SucceededEndsRunningAndRestarting) {
  JobStatus status;
  SetCondition(status, kCondRunning, true, "JobRunning", "", kT0);
  SetCondition(status, kCondSucceeded, true, "JobSucceeded", "chief exited 0", kT1);
  EXPECT_EQ(Phase(status), kCondSucceeded);
  EXPECT_TRUE(IsFinished(status));
  EXPECT_EQ(StatusOf(status, kCondRunning), "False");
  EXPECT_EQ(FindCondition(status, kCondRunning)->reason, "JobSucceeded");
  // Restarting was never set: it stays absent rather than appearing False.
  EXPECT_EQ(StatusOf(status, kCondRestarting), "absent");
}

TEST(JobStatusTest, FailedEndsRunningAndRestarting) {
  JobStatus status;
  SetCondition(status, kCondRunning, true, "JobRunning", "", kT0);
  SetCondition(status, kCondRestarting, true, "JobRestarting", "", kT1);
  SetCondition(status, kCondFailed, true, "BackoffLimitExceeded", "3 restarts", kT2);
  EXPECT_EQ(Phase(status), kCondFailed);
  EXPECT_TRUE(IsFinished(status));
  EXPECT_EQ(StatusOf(status, kCondRunning), "False");
  EXPECT_EQ(StatusOf(status, kCondRestarting), "False");
  EXPECT_EQ(FindCondition(status, kCondRestarting)->reason, "JobFailed");
}

TEST(JobStatusTest, SuspendedAndResumed) {
  JobStatus status;
  SetCondition(status, kCondRunning, true, "JobRunning", "", kT0);
  SetCondition(status, kCondSuspended, true, "JobSuspended", "", kT1);
  EXPECT_EQ(Phase(status), kCondSuspended);
  SetCondition(status, kCondSuspended, false, "JobResumed", "", kT2);
  EXPECT_EQ(StatusOf(status, kCondSuspended), "False");
  // Turning a condition off keeps its place; the phase is the last True one.
  EXPECT_EQ(Phase(status), kCondRunning);
}

TEST(JobStatusTest, TransitionTimeMovesOnlyWhenTheStatusFlips) {
  JobStatus status;
  SetCondition(status, kCondRunning, true, "JobRunning", "a", kT0);
  // Same status, same reason and message: nothing changes.
  SetCondition(status, kCondRunning, true, "JobRunning", "a", kT1);
  EXPECT_EQ(FindCondition(status, kCondRunning)->last_update_time, kT0);
  // Same status, new message: updated, not transitioned.
  SetCondition(status, kCondRunning, true, "JobRunning", "b", kT1);
  EXPECT_EQ(FindCondition(status, kCondRunning)->last_update_time, kT1);
  EXPECT_EQ(FindCondition(status, kCondRunning)->last_transition_time, kT0);
  // Flipped: both move.
  SetCondition(status, kCondRunning, false, "JobRestarting", "", kT2);
  EXPECT_EQ(FindCondition(status, kCondRunning)->last_transition_time, kT2);
  EXPECT_EQ(FindCondition(status, kCondRunning)->last_update_time, kT2);
  // One entry per type, whatever happened.
  EXPECT_EQ(Types(status), (std::vector<std::string>{kCondRunning}));
}

}  // namespace
}  // namespace kubetrain::controller
