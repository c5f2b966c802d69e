// The reconcile pass's failure policy without an API server: which failed
// pods are restarted and when the job fails (backoff limit, a permanent
// exit under ExitCode/Never).
#include "operator/controller/failure_policy.h"

#include <vector>

#include "api/exit_codes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kubetrain::controller {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

FailedReplica Failed(int index, api::ReplicaExit exit, api::RestartPolicy policy) {
  FailedReplica f;
  f.type = api::ReplicaType::kWorker;
  f.index = index;
  f.pod_name = "job-worker-" + std::to_string(index);
  f.exit = exit;
  f.policy = policy;
  return f;
}

api::RunPolicy Backoff(int limit) {
  api::RunPolicy p;
  p.backoff_limit = limit;
  return p;
}

TEST(DescribeFailure, NamesReplicaPodAndExit) {
  FailedReplica f = Failed(1, api::ReplicaExit::Code(3), api::RestartPolicy::kNever);
  f.detail = " (OOMKilled)";
  EXPECT_EQ(DescribeFailure(f), "worker-1 (pod job-worker-1) exited with code 3 (OOMKilled)");
}

TEST(DecideFailures, NothingFailedNothingToDo) {
  const FailureDecision d = DecideFailures("job", Backoff(3), 0, {});
  EXPECT_THAT(d.restart, IsEmpty());
  EXPECT_FALSE(d.fail.has_value());
}

TEST(DecideFailures, RestartsRetryableExitsWithinTheBackoffLimit) {
  const FailureDecision d =
      DecideFailures("job", Backoff(3), 1,
                     {Failed(0, api::ReplicaExit::Signal(9), api::RestartPolicy::kExitCode),
                      Failed(1, api::ReplicaExit::Code(1), api::RestartPolicy::kOnFailure)});
  EXPECT_THAT(d.restart, ElementsAre(0, 1));
  EXPECT_FALSE(d.fail.has_value());
}

TEST(DecideFailures, RestartsCountedSoFarAlreadyOverTheLimit) {
  // In-place container restarts can exceed the limit with no failed pod.
  const FailureDecision d = DecideFailures("job", Backoff(2), 3, {});
  ASSERT_TRUE(d.fail.has_value());
  EXPECT_EQ(d.fail->reason, "BackoffLimitExceeded");
  EXPECT_THAT(d.fail->message, HasSubstr("3 restarts, backoffLimit 2"));
  EXPECT_THAT(d.restart, IsEmpty());
}

TEST(DecideFailures, OverTheLimitNamesTheFailureAtHand) {
  // In-place restarts already used the limit up; the replica failing now is
  // the one the message must name (a lost peer, here).
  const FailureDecision d = DecideFailures(
      "job", Backoff(3), 4,
      {Failed(0, api::ReplicaExit::Code(kExitPeerLost), api::RestartPolicy::kExitCode)});
  ASSERT_TRUE(d.fail.has_value());
  EXPECT_EQ(d.fail->reason, "BackoffLimitExceeded");
  EXPECT_THAT(d.fail->message, HasSubstr("4 restarts, backoffLimit 3"));
  EXPECT_THAT(d.fail->message,
              HasSubstr("last failure: worker-0 (pod job-worker-0) exited with code 129 (a lost "
                        "peer)"));
}

TEST(DecideFailures, TheRestartThatWouldPassTheLimitFailsTheJob) {
  // Limit 2 with 1 restart so far: the first failure is restarted, the
  // second would be restart number 3.
  const FailureDecision d =
      DecideFailures("job", Backoff(2), 1,
                     {Failed(0, api::ReplicaExit::Code(1), api::RestartPolicy::kOnFailure),
                      Failed(1, api::ReplicaExit::Code(1), api::RestartPolicy::kOnFailure)});
  EXPECT_THAT(d.restart, ElementsAre(0));
  ASSERT_TRUE(d.fail.has_value());
  EXPECT_EQ(d.fail->reason, "BackoffLimitExceeded");
  EXPECT_THAT(d.fail->message, HasSubstr("worker-1 (pod job-worker-1)"));
}

TEST(DecideFailures, NoBackoffLimitRestartsForever) {
  const FailureDecision d =
      DecideFailures("job", api::RunPolicy{}, 1000,
                     {Failed(0, api::ReplicaExit::Code(1), api::RestartPolicy::kAlways)});
  EXPECT_THAT(d.restart, ElementsAre(0));
  EXPECT_FALSE(d.fail.has_value());
}

TEST(DecideFailures, PermanentExitFailsTheJobAndStopsTheDecision) {
  const FailureDecision d =
      DecideFailures("job", Backoff(5), 0,
                     {Failed(0, api::ReplicaExit::Code(2), api::RestartPolicy::kExitCode),
                      Failed(1, api::ReplicaExit::Signal(9), api::RestartPolicy::kExitCode)});
  EXPECT_THAT(d.restart, IsEmpty());
  ASSERT_TRUE(d.fail.has_value());
  EXPECT_EQ(d.fail->reason, "ReplicaFailed");
  EXPECT_EQ(d.fail->message,
            "TrainingJob job has failed: worker-0 (pod job-worker-0) exited with code 2");
}

TEST(DecideFailures, NeverPolicyFailsOnAnyNonZeroExit) {
  const FailureDecision d = DecideFailures(
      "job", Backoff(5), 0, {Failed(0, api::ReplicaExit::Signal(9), api::RestartPolicy::kNever)});
  ASSERT_TRUE(d.fail.has_value());
  EXPECT_EQ(d.fail->reason, "ReplicaFailed");
}

TEST(DecideFailures, ASucceededExitIsNeitherRestartedNorAFailure) {
  const FailureDecision d = DecideFailures(
      "job", Backoff(5), 0, {Failed(0, api::ReplicaExit::Code(0), api::RestartPolicy::kExitCode)});
  EXPECT_THAT(d.restart, IsEmpty());
  EXPECT_FALSE(d.fail.has_value());
}

}  // namespace
}  // namespace kubetrain::controller
