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

TEST(DescribeFailure, NamesReplicaPodNodeExitReasonAndMessage) {
  FailedReplica f = Failed(1, api::ReplicaExit::Code(137), api::RestartPolicy::kNever);
  f.detail = " (OOMKilled)";
  f.reason = api::FailureReason::kOomKilled;
  EXPECT_EQ(DescribeFailure(f),
            "worker-1 (pod job-worker-1) exited with code 137 (OOMKilled) [OOMKilled]");
  f.node = "node-b";
  f.reason = api::FailureReason::kConfigError;
  f.message = "kubetrain: error: unknown model 'xyz'";
  EXPECT_EQ(DescribeFailure(f),
            "worker-1 (pod job-worker-1 on node-b) exited with code 137 (OOMKilled) "
            "[ConfigError]: kubetrain: error: unknown model 'xyz'");
}

FailedReplica Disrupted(int index, api::FailureReason reason, api::RestartPolicy policy) {
  FailedReplica f = Failed(index, api::ReplicaExit::Code(137), policy);
  f.reason = reason;
  return f;
}

// Evicted, preempted and node-lost replicas are recreated whatever their
// restart policy, and do not use up the backoff limit.
TEST(DecideFailures, DisruptionsAreRecreatedWithoutCounting) {
  const FailureDecision d =
      DecideFailures("job", Backoff(0), 0, 0,
                     {Disrupted(0, api::FailureReason::kEvicted, api::RestartPolicy::kNever),
                      Disrupted(1, api::FailureReason::kPreempted, api::RestartPolicy::kExitCode),
                      Disrupted(2, api::FailureReason::kNodeLost, api::RestartPolicy::kOnFailure)});
  EXPECT_THAT(d.disrupted, ElementsAre(0, 1, 2));
  EXPECT_THAT(d.restart, IsEmpty());
  EXPECT_FALSE(d.fail.has_value());
}

// Past runPolicy.maxDisruptions a disruption is decided as any failure:
// counted, and under Never the end of the job.
TEST(DecideFailures, DisruptionsPastTheMaximumCount) {
  api::RunPolicy p = Backoff(5);
  p.max_disruptions = 3;
  const FailureDecision d =
      DecideFailures("job", p, 0, 2,
                     {Disrupted(0, api::FailureReason::kPreempted, api::RestartPolicy::kExitCode),
                      Disrupted(1, api::FailureReason::kPreempted, api::RestartPolicy::kExitCode),
                      Failed(2, api::ReplicaExit::Code(1), api::RestartPolicy::kOnFailure)});
  EXPECT_THAT(d.disrupted, ElementsAre(0));
  EXPECT_THAT(d.restart, ElementsAre(1, 2));
  EXPECT_FALSE(d.fail.has_value());
  const FailureDecision never = DecideFailures(
      "job", p, 0, 3, {Disrupted(0, api::FailureReason::kEvicted, api::RestartPolicy::kNever)});
  EXPECT_THAT(never.disrupted, IsEmpty());
  ASSERT_TRUE(never.fail.has_value());
  EXPECT_EQ(never.fail->reason, "ReplicaFailed");
  EXPECT_THAT(never.fail->message, HasSubstr("[Evicted]"));
  EXPECT_EQ(MaxDisruptions(api::RunPolicy{}), api::kDefaultMaxDisruptions);
}

TEST(DecideFailures, NothingFailedNothingToDo) {
  const FailureDecision d = DecideFailures("job", Backoff(3), 0, 0, {});
  EXPECT_THAT(d.restart, IsEmpty());
  EXPECT_FALSE(d.fail.has_value());
}

TEST(DecideFailures, RestartsRetryableExitsWithinTheBackoffLimit) {
  const FailureDecision d =
      DecideFailures("job", Backoff(3), 1, 0,
                     {Failed(0, api::ReplicaExit::Signal(9), api::RestartPolicy::kExitCode),
                      Failed(1, api::ReplicaExit::Code(1), api::RestartPolicy::kOnFailure)});
  EXPECT_THAT(d.restart, ElementsAre(0, 1));
  EXPECT_FALSE(d.fail.has_value());
}

TEST(DecideFailures, RestartsCountedSoFarAlreadyOverTheLimit) {
  // In-place container restarts can exceed the limit with no failed pod.
  const FailureDecision d = DecideFailures("job", Backoff(2), 3, 0, {});
  ASSERT_TRUE(d.fail.has_value());
  EXPECT_EQ(d.fail->reason, "BackoffLimitExceeded");
  EXPECT_THAT(d.fail->message, HasSubstr("3 restarts, backoffLimit 2"));
  EXPECT_THAT(d.restart, IsEmpty());
}

TEST(DecideFailures, OverTheLimitNamesTheFailureAtHand) {
  // In-place restarts already used the limit up; the replica failing now is
  // the one the message must name (a lost peer, here).
  const FailureDecision d = DecideFailures(
      "job", Backoff(3), 4, 0,
      {Failed(0, api::ReplicaExit::Code(kExitPeerLost), api::RestartPolicy::kExitCode)});
  ASSERT_TRUE(d.fail.has_value());
  EXPECT_EQ(d.fail->reason, "BackoffLimitExceeded");
  EXPECT_THAT(d.fail->message, HasSubstr("4 restarts, backoffLimit 3"));
  EXPECT_THAT(d.fail->message,
              HasSubstr("last failure: worker-0 (pod job-worker-0) exited with code 129 (a lost "
                        "peer) [Error]"));
}

TEST(DecideFailures, TheRestartThatWouldPassTheLimitFailsTheJob) {
  // Limit 2 with 1 restart so far: the first failure is restarted, the
  // second would be restart number 3.
  const FailureDecision d =
      DecideFailures("job", Backoff(2), 1, 0,
                     {Failed(0, api::ReplicaExit::Code(1), api::RestartPolicy::kOnFailure),
                      Failed(1, api::ReplicaExit::Code(1), api::RestartPolicy::kOnFailure)});
  EXPECT_THAT(d.restart, ElementsAre(0));
  ASSERT_TRUE(d.fail.has_value());
  EXPECT_EQ(d.fail->reason, "BackoffLimitExceeded");
  EXPECT_THAT(d.fail->message, HasSubstr("worker-1 (pod job-worker-1)"));
}

TEST(DecideFailures, NoBackoffLimitRestartsForever) {
  const FailureDecision d =
      DecideFailures("job", api::RunPolicy{}, 1000, 0,
                     {Failed(0, api::ReplicaExit::Code(1), api::RestartPolicy::kAlways)});
  EXPECT_THAT(d.restart, ElementsAre(0));
  EXPECT_FALSE(d.fail.has_value());
}

TEST(DecideFailures, PermanentExitFailsTheJobAndStopsTheDecision) {
  const FailureDecision d =
      DecideFailures("job", Backoff(5), 0, 0,
                     {Failed(0, api::ReplicaExit::Code(2), api::RestartPolicy::kExitCode),
                      Failed(1, api::ReplicaExit::Signal(9), api::RestartPolicy::kExitCode)});
  EXPECT_THAT(d.restart, IsEmpty());
  ASSERT_TRUE(d.fail.has_value());
  EXPECT_EQ(d.fail->reason, "ReplicaFailed");
  EXPECT_EQ(d.fail->message,
            "TrainingJob job has failed: worker-0 (pod job-worker-0) exited with code 2 [Error]");
}

TEST(DecideFailures, NeverPolicyFailsOnAnyNonZeroExit) {
  const FailureDecision d =
      DecideFailures("job", Backoff(5), 0, 0,
                     {Failed(0, api::ReplicaExit::Signal(9), api::RestartPolicy::kNever)});
  ASSERT_TRUE(d.fail.has_value());
  EXPECT_EQ(d.fail->reason, "ReplicaFailed");
}

TEST(DecideFailures, ASucceededExitIsNeitherRestartedNorAFailure) {
  const FailureDecision d =
      DecideFailures("job", Backoff(5), 0, 0,
                     {Failed(0, api::ReplicaExit::Code(0), api::RestartPolicy::kExitCode)});
  EXPECT_THAT(d.restart, IsEmpty());
  EXPECT_FALSE(d.fail.has_value());
}

}  // namespace
}  // namespace kubetrain::controller
