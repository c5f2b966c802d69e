// Whether a job still progresses, from the poller's readings on a clock the
// test sets: a frozen replica (no answer) or one at the lowest step is named
// once nothing advanced for the timeout, with its pod, node and step; any
// step moving clears it; a replica waiting on its peers that long counts;
// a parameter server is named only when it stops answering; a job without
// metrics is never judged.
#include "operator/controller/stall_tracker.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kubetrain::controller {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

ReplicaReading Read(const std::string& replica, std::optional<int64_t> step, double waiting = 0) {
  return ReplicaReading{replica, "job-" + replica, "node-b", step, waiting};
}

TEST(StallTracker, AFrozenReplicaIsNamedOnceNothingAdvancedForTheTimeout) {
  StallTracker t;
  t.Observe("uid", {Read("worker-0", 100), Read("worker-1", 100)}, 0);
  t.Observe("uid", {Read("worker-0", 4121), Read("worker-1", 4120)}, 10);
  // worker-1 freezes (SIGSTOP): its metrics stop answering; worker-0 waits.
  t.Observe("uid", {Read("worker-0", 4121), Read("worker-1", std::nullopt)}, 20);
  EXPECT_FALSE(t.Check("uid", 30, 39).has_value()) << "29 s without progress";
  t.Observe("uid", {Read("worker-0", 4121), Read("worker-1", std::nullopt)}, 40);
  std::optional<Stall> s = t.Check("uid", 30, 52);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->message,
            "worker-1 (pod job-worker-1 on node-b) stopped answering (last at step 4120); "
            "others wait at step 4121");
  EXPECT_THAT(s->pods, ElementsAre("job-worker-1"));
  EXPECT_FALSE(t.Check("uid", 0, 1000).has_value()) << "timeout 0 is off";
  // It comes back and the job moves on: no stall.
  t.Observe("uid", {Read("worker-0", 4122), Read("worker-1", 4122)}, 60);
  EXPECT_FALSE(t.Check("uid", 30, 70).has_value());
}

TEST(StallTracker, TheReplicasAtTheLowestStepAreTheOnesBehind) {
  StallTracker t;
  t.Observe("uid", {Read("chief-0", 50), Read("worker-0", 49), Read("worker-1", 50)}, 0);
  t.Observe("uid", {Read("chief-0", 50), Read("worker-0", 49), Read("worker-1", 50)}, 45);
  std::optional<Stall> s = t.Check("uid", 40, 45);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->message,
            "worker-0 (pod job-worker-0 on node-b) has not finished step 50; others "
            "wait at step 50");
  EXPECT_THAT(s->pods, ElementsAre("job-worker-0"));
  // All at the same step: all named.
  StallTracker same;
  same.Observe("uid", {Read("worker-0", 7), Read("worker-1", 7)}, 0);
  std::optional<Stall> all = same.Check("uid", 10, 11);
  ASSERT_TRUE(all.has_value());
  EXPECT_THAT(all->pods, UnorderedElementsAre("job-worker-0", "job-worker-1"));
  EXPECT_THAT(all->message, HasSubstr("has not finished step 8"));
}

TEST(StallTracker, WaitingOnPeersThatLongCountsBeforeTheJobIsIdleThatLong) {
  StallTracker t;
  t.Observe("uid", {Read("worker-0", 10), Read("worker-1", 9)}, 0);
  t.Observe("uid", {Read("worker-0", 11), Read("worker-1", 9)}, 5);
  t.Observe("uid", {Read("worker-0", 11, 31), Read("worker-1", 9)}, 6);
  std::optional<Stall> s = t.Check("uid", 30, 6);
  ASSERT_TRUE(s.has_value()) << "worker-0's stall gauge says 31 s";
  EXPECT_THAT(s->pods, ElementsAre("job-worker-1"));
  EXPECT_THAT(s->message, HasSubstr("has waited that long for its peers"));
}

TEST(StallTracker, AParameterServerIsNamedWhenItStopsAnsweringNeverForItsStep) {
  StallTracker t;
  ReplicaReading ps{"ps-0", "job-ps-0", "node-a", 3, 0, /*trains=*/false};
  t.Observe("uid", {ps, Read("worker-0", 5), Read("worker-1", 5)}, 0);
  ps.step = std::nullopt;
  t.Observe("uid", {ps, Read("worker-0", 5), Read("worker-1", 5)}, 50);
  std::optional<Stall> s = t.Check("uid", 30, 60);
  ASSERT_TRUE(s.has_value());
  EXPECT_THAT(s->pods, ElementsAre("job-ps-0")) << "the workers wait for it";
  EXPECT_THAT(s->message, HasSubstr("ps-0 (pod job-ps-0 on node-a) stopped answering"));
  EXPECT_THAT(s->message, Not(HasSubstr("last at step")));
}

TEST(StallTracker, ARecreatedPodAndForgetStartOver) {
  StallTracker t;
  t.Observe("uid", {Read("worker-0", 5)}, 0);
  ASSERT_TRUE(t.Check("uid", 10, 20).has_value());
  ReplicaReading fresh = Read("worker-0", 5);
  fresh.pod = "job-worker-0-new";
  t.Observe("uid", {fresh}, 20);
  EXPECT_FALSE(t.Check("uid", 10, 25).has_value()) << "a new pod starts its own clock";
  t.Forget("uid");
  EXPECT_FALSE(t.Check("uid", 10, 1000).has_value()) << "forgotten";
  EXPECT_FALSE(t.Check("never", 10, 1000).has_value());
}

TEST(StallTracker, AJobWhoseMetricsNeverAnsweredIsNotJudged) {
  StallTracker t;
  t.Observe("uid", {Read("worker-0", std::nullopt), Read("worker-1", std::nullopt)}, 0);
  t.Observe("uid", {Read("worker-0", std::nullopt), Read("worker-1", std::nullopt)}, 500);
  EXPECT_FALSE(t.Check("uid", 10, 1000).has_value()) << "no metrics to judge by";
  // Once one answered, the silent one is the replica behind.
  t.Observe("uid", {Read("worker-0", 7), Read("worker-1", std::nullopt)}, 1000);
  std::optional<Stall> s = t.Check("uid", 10, 1020);
  ASSERT_TRUE(s.has_value());
  EXPECT_THAT(s->pods, ElementsAre("job-worker-1"));
}

}  // namespace
}  // namespace kubetrain::controller
