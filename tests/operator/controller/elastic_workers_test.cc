// The Waiting condition's and the ScaleRefused event's decisions for elastic
// jobs, without an API server.
#include "operator/controller/elastic_workers.h"

#include <gtest/gtest.h>

#include "tests/operator/controller/planner_test_objects.h"

namespace kubetrain::controller {
namespace {

using namespace testing_objects;  // NOLINT(build/namespaces)
using api::ReplicaType;

api::TrainingJob Elastic(int workers, int min, int max) {
  api::TrainingJob job = Job(0, workers);
  job.spec.elastic_policy = api::ElasticPolicy{min, max};
  return job;
}

TEST(ElasticWorkersTest, CountsRunningWorkersOnly) {
  ReplicaObjects pods;
  pods[{ReplicaType::kPS, 0}] = Pod("ps", 0);
  pods[{ReplicaType::kWorker, 0}] = Pod("worker", 0);
  pods[{ReplicaType::kWorker, 1}] = Pod("worker", 1, {.phase = "Pending"});
  pods[{ReplicaType::kWorker, 2}] = Pod("worker", 2, {.deleting = true});
  pods[{ReplicaType::kWorker, 3}] = Pod("worker", 3, {.phase = "Failed"});
  EXPECT_EQ(RunningWorkers(pods), 1);
}

TEST(ElasticWorkersTest, WaitsBelowMinReplicasNamingHowManyMore) {
  const api::TrainingJob job = Elastic(3, 2, 4);
  ReplicaObjects pods;
  EXPECT_EQ(WaitingMessage(job, pods), "needs 2 more workers: 0 of minReplicas 2 running");
  pods[{ReplicaType::kWorker, 0}] = Pod("worker", 0);
  pods[{ReplicaType::kWorker, 1}] = Pod("worker", 1, {.phase = "Pending"});
  EXPECT_EQ(WaitingMessage(job, pods), "needs 1 more worker: 1 of minReplicas 2 running");
  pods[{ReplicaType::kWorker, 1}] = Pod("worker", 1);
  EXPECT_EQ(WaitingMessage(job, pods), std::nullopt);
  // Lost again (its node went, the pod is being deleted): waiting again.
  pods[{ReplicaType::kWorker, 0}] = Pod("worker", 0, {.deleting = true});
  EXPECT_EQ(WaitingMessage(job, pods), "needs 1 more worker: 1 of minReplicas 2 running");
}

TEST(ElasticWorkersTest, AFixedJobNeverWaits) {
  EXPECT_EQ(WaitingMessage(Job(0, 3), {}), std::nullopt);
}

TEST(ElasticWorkersTest, ScaleRefusedNamesTheAskedAndAllowedCounts) {
  EXPECT_EQ(ScaleRefusedMessage({6, 4}),
            "spec.replicaSpecs.Worker.replicas 6 is above spec.elasticPolicy.maxReplicas 4: "
            "running 4 workers");
  EXPECT_EQ(ScaleRefusedMessage({0, 1}),
            "spec.replicaSpecs.Worker.replicas 0 is below spec.elasticPolicy.minReplicas 1: "
            "running 1 worker");
}

}  // namespace
}  // namespace kubetrain::controller
