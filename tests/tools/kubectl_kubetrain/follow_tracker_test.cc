// FollowTracker's decisions from pod snapshots: restarts, re-created pods,
// dropped streams, refused opens, --replica, and when the follow is done.
#include "tools/kubectl_kubetrain/follow_tracker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kubetrain::kubectl_plugin {
namespace {

PodView View(const std::string& type, int index, const std::string& uid, int restarts, bool running,
             bool terminated = false) {
  PodView v;
  v.replica = {type, index};
  v.pod = "job-" + type + "-" + std::to_string(index);
  v.uid = uid;
  v.container = "kubetrain";
  v.restarts = restarts;
  v.running = running;
  v.terminated = terminated;
  return v;
}

StreamToOpen Open(const std::string& type, int index, const std::string& uid, int restart,
                  bool resume = false) {
  return {{type, index}, "job-" + type + "-" + std::to_string(index), uid, "kubetrain", restart,
          resume};
}

TEST(FollowTrackerTest, OpensEachStartedReplicaOnceAndWaitsForPendingOnes) {
  FollowTracker tracker;
  PodView pending = View("worker", 1, "u1", 0, false);
  EXPECT_THAT(tracker.Observe({View("worker", 0, "u0", 0, true), pending}),
              ::testing::ElementsAre(Open("worker", 0, "u0", 0)));
  EXPECT_TRUE(tracker.Observe({View("worker", 0, "u0", 0, true), pending}).empty());
  EXPECT_THAT(tracker.Observe({View("worker", 0, "u0", 0, true), View("worker", 1, "u1", 0, true)}),
              ::testing::ElementsAre(Open("worker", 1, "u1", 0)));
  EXPECT_EQ(tracker.open_streams(), 2);
}

TEST(FollowTrackerTest, ReopensUnderTheNextRestartOnceTheNewInstanceStarts) {
  FollowTracker tracker;
  tracker.Observe({View("worker", 0, "u0", 0, true)});
  // The kubelet already counts the restart while the old stream still drains.
  EXPECT_TRUE(tracker.Observe({View("worker", 0, "u0", 1, true)}).empty());
  tracker.StreamEnded("u0", 0, /*complete=*/true);
  // Waiting in back-off: nothing to stream yet.
  EXPECT_TRUE(tracker.Observe({View("worker", 0, "u0", 1, false)}).empty());
  EXPECT_THAT(tracker.Observe({View("worker", 0, "u0", 1, true)}),
              ::testing::ElementsAre(Open("worker", 0, "u0", 1)));
}

TEST(FollowTrackerTest, PicksUpARecreatedPodUnderItsNewUid) {
  FollowTracker tracker;
  tracker.Observe({View("ps", 0, "old", 2, true)});
  EXPECT_THAT(tracker.Observe({View("ps", 0, "new", 0, true)}),
              ::testing::ElementsAre(Open("ps", 0, "new", 0)));
  EXPECT_EQ(tracker.open_streams(), 2);  // the old pod's stream drains on its own
  tracker.StreamEnded("old", 2, true);
  tracker.StreamEnded("new", 0, true);
  EXPECT_TRUE(tracker.Done(/*job_finished=*/true));
}

TEST(FollowTrackerTest, ResumesADroppedStreamButNotAFinishedOne) {
  FollowTracker tracker;
  tracker.Observe({View("worker", 0, "u0", 0, true)});
  tracker.StreamEnded("u0", 0, /*complete=*/false);  // connection dropped
  EXPECT_THAT(tracker.Observe({View("worker", 0, "u0", 0, true)}),
              ::testing::ElementsAre(Open("worker", 0, "u0", 0, /*resume=*/true)));
  tracker.StreamEnded("u0", 0, /*complete=*/true);
  EXPECT_TRUE(tracker.Observe({View("worker", 0, "u0", 0, false, /*terminated=*/true)}).empty());
  EXPECT_TRUE(tracker.Done(true));
  EXPECT_FALSE(FollowTracker().Done(false));
}

TEST(FollowTrackerTest, RetriesARefusedOpenEvenWhenTheContainerEndedMeanwhile) {
  FollowTracker tracker;
  tracker.Observe({View("chief", 0, "c", 0, true)});
  tracker.StreamEnded("c", 0, /*complete=*/false);  // 400: not ready yet
  EXPECT_THAT(tracker.Observe({View("chief", 0, "c", 0, false, true)}),
              ::testing::ElementsAre(Open("chief", 0, "c", 0, true)));
}

TEST(FollowTrackerTest, FollowsOnlyTheAskedReplica) {
  FollowTracker tracker(ReplicaRef{"worker", 1});
  EXPECT_THAT(tracker.Observe({View("worker", 0, "a", 0, true), View("worker", 1, "b", 0, true)}),
              ::testing::ElementsAre(Open("worker", 1, "b", 0)));
  EXPECT_FALSE(tracker.Done(true));
  tracker.StreamEnded("b", 0, true);
  EXPECT_TRUE(tracker.Done(true));
}

}  // namespace
}  // namespace kubetrain::kubectl_plugin
