// Which pods a pass creates and deletes, without an API server.
#include "operator/controller/pod_planner.h"

#include <gtest/gtest.h>

#include "operator/kube/object.h"
#include "tests/operator/controller/planner_test_objects.h"

namespace kubetrain::controller {
namespace {

using namespace testing_objects;  // NOLINT(build/namespaces)
using api::ReplicaType;

std::vector<std::string> Names(const std::vector<kube::ObjectPtr>& objects) {
  std::vector<std::string> out;
  for (const kube::ObjectPtr& o : objects) out.push_back(kube::Name(*o));
  return out;
}

std::vector<std::string> Names(const std::vector<PodToCreate>& pods) {
  std::vector<std::string> out;
  for (const PodToCreate& p : pods) out.push_back(p.name);
  return out;
}

TEST(PodPlannerTest, MissingPodsInReplicaOrder) {
  const api::TrainingJob job = Job(1, 3);
  ReplicaObjects pods;
  EXPECT_EQ(Names(MissingPods(job, pods, {})),
            (std::vector<std::string>{"j-ps-0", "j-worker-0", "j-worker-1", "j-worker-2"}));
  pods[{ReplicaType::kWorker, 1}] = Pod("worker", 1);
  const std::vector<PodToCreate> missing = MissingPods(job, pods, {});
  EXPECT_EQ(Names(missing), (std::vector<std::string>{"j-ps-0", "j-worker-0", "j-worker-2"}));
  EXPECT_EQ(missing[2].replica, (ReplicaKey{ReplicaType::kWorker, 2}));
}

TEST(PodPlannerTest, CompletedReplicasAreNeverRunAgain) {
  const api::TrainingJob job = Job(0, 3);
  ReplicaObjects pods;
  pods[{ReplicaType::kWorker, 0}] = Pod("worker", 0, {.phase = "Succeeded"});
  api::JobStatus status;
  status.replica_statuses[ReplicaType::kWorker].completed_indexes = {2};  // its pod is gone
  EXPECT_TRUE(ReplicaCompleted(pods, status, {ReplicaType::kWorker, 0}));
  EXPECT_FALSE(ReplicaCompleted(pods, status, {ReplicaType::kWorker, 1}));
  EXPECT_TRUE(ReplicaCompleted(pods, status, {ReplicaType::kWorker, 2}));
  EXPECT_EQ(Names(MissingPods(job, {}, status)),
            (std::vector<std::string>{"j-worker-0", "j-worker-1"}));
  EXPECT_EQ(Names(MissingPods(job, pods, status)), (std::vector<std::string>{"j-worker-1"}));
}

TEST(PodPlannerTest, StrayPodsGoUnlessAlreadyGoing) {
  JobObjects objects;
  objects.stray_pods = {Pod("worker", 3), Pod("worker", 4, {.deleting = true})};
  EXPECT_EQ(Names(StrayPodsToDelete(objects)), (std::vector<std::string>{"j-worker-3"}));
}

// A scale-down from 5 to 2 workers: the highest index goes first, pods
// without replica labels last.
TEST(PodPlannerTest, ScaleDownDeletesTheHighestIndexFirst) {
  JobObjects objects;
  kube::Json unlabelled = *Pod("worker", 9);
  unlabelled["metadata"]["name"] = "j-odd";
  unlabelled["metadata"]["labels"].erase(api::kLabelReplicaIndex);
  objects.stray_pods = {std::make_shared<const kube::Json>(unlabelled), Pod("worker", 2),
                        Pod("worker", 4), Pod("worker", 3)};
  EXPECT_EQ(Names(StrayPodsToDelete(objects)),
            (std::vector<std::string>{"j-worker-4", "j-worker-3", "j-worker-2", "j-odd"}));
}

// Pods beyond the spec's replicas are no replicas of it: a scaled-down worker
// that exits 0 neither counts as success nor is recreated.
TEST(PodPlannerTest, ScaledDownPodsAreNotTheSpecs) {
  const api::TrainingJob job = Job(0, 2);
  ReplicaObjects pods;
  pods[{ReplicaType::kWorker, 0}] = Pod("worker", 0);
  pods[{ReplicaType::kWorker, 1}] = Pod("worker", 1);
  EXPECT_TRUE(MissingPods(job, pods, {}).empty());
  EXPECT_FALSE(ReplicaCompleted(pods, {}, {ReplicaType::kWorker, 2}));
}

JobObjects FinishedJob() {
  JobObjects objects;
  objects.pods[{ReplicaType::kPS, 0}] = Pod("ps", 0);
  objects.pods[{ReplicaType::kWorker, 0}] = Pod("worker", 0, {.phase = "Succeeded"});
  objects.pods[{ReplicaType::kWorker, 1}] = Pod("worker", 1, {.phase = "Failed"});
  objects.pods[{ReplicaType::kWorker, 2}] = Pod("worker", 2, {.deleting = true});
  objects.services[{ReplicaType::kPS, 0}] = Service("ps", 0);
  objects.services[{ReplicaType::kWorker, 1}] = Service("worker", 1);
  objects.stray_pods = {Pod("worker", 5)};
  return objects;
}

TEST(PodPlannerTest, CleanPodPolicy) {
  const JobObjects objects = FinishedJob();
  EXPECT_TRUE(PodsToCleanUp(api::CleanPodPolicy::kNone, objects).empty());

  const std::vector<CleanUpItem> running = PodsToCleanUp(api::CleanPodPolicy::kRunning, objects);
  ASSERT_EQ(running.size(), 2u);
  EXPECT_EQ(kube::Name(*running[0].pod), "j-ps-0");
  ASSERT_NE(running[0].service, nullptr);
  EXPECT_EQ(kube::Name(*running[0].service), "j-ps-0");
  EXPECT_EQ(kube::Name(*running[1].pod), "j-worker-5");  // strays last, no Service
  EXPECT_EQ(running[1].service, nullptr);

  const std::vector<CleanUpItem> all = PodsToCleanUp(api::CleanPodPolicy::kAll, objects);
  std::vector<std::string> names;
  for (const CleanUpItem& item : all) names.push_back(kube::Name(*item.pod));
  EXPECT_EQ(names, (std::vector<std::string>{"j-ps-0", "j-worker-0", "j-worker-1", "j-worker-5"}));
  EXPECT_EQ(all[1].service, nullptr);  // worker-0 has no Service in the cache
  ASSERT_NE(all[2].service, nullptr);
  EXPECT_EQ(kube::Name(*all[2].service), "j-worker-1");
}

TEST(PodPlannerTest, SuspendStopsWhatStillRuns) {
  const JobObjects objects = FinishedJob();
  EXPECT_EQ(Names(PodsToSuspend(objects.pods)), (std::vector<std::string>{"j-ps-0", "j-worker-1"}));
}

}  // namespace
}  // namespace kubetrain::controller
