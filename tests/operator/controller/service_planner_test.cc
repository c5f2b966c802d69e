// Which Services a pass creates, per serviceMode.
#include "operator/controller/service_planner.h"

#include <gtest/gtest.h>

#include "operator/kube/object.h"
#include "tests/operator/controller/planner_test_objects.h"

namespace kubetrain::controller {
namespace {

using namespace testing_objects;  // NOLINT(build/namespaces)
using api::ReplicaType;

TEST(ServicePlannerTest, OnePerReplicaWithoutOne) {
  const api::TrainingJob job = Job(1, 2);
  JobObjects objects;
  objects.services[{ReplicaType::kWorker, 0}] = Service("worker", 0);
  const std::vector<ServiceToCreate> missing = MissingServices(job, objects);
  ASSERT_EQ(missing.size(), 2u);
  EXPECT_EQ(missing[0].name, "j-ps-0");
  EXPECT_EQ(missing[0].replica, (ReplicaKey{ReplicaType::kPS, 0}));
  EXPECT_EQ(missing[1].name, "j-worker-1");
  EXPECT_EQ(missing[1].replica, (ReplicaKey{ReplicaType::kWorker, 1}));
  objects.services[{ReplicaType::kPS, 0}] = Service("ps", 0);
  objects.services[{ReplicaType::kWorker, 1}] = Service("worker", 1);
  EXPECT_TRUE(MissingServices(job, objects).empty());
}

TEST(ServicePlannerTest, ScaleDownDeletesTheServicesBeyondTheSpecHighestFirst) {
  const api::TrainingJob job = Job(1, 2);
  JobObjects objects;
  objects.services[{ReplicaType::kPS, 0}] = Service("ps", 0);
  for (int i = 0; i < 5; ++i) objects.services[{ReplicaType::kWorker, i}] = Service("worker", i);
  std::vector<std::string> names;
  for (const kube::ObjectPtr& svc : StrayServicesToDelete(job, objects)) {
    names.push_back(kube::Name(*svc));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"j-worker-4", "j-worker-3", "j-worker-2"}));
  objects.services.erase({ReplicaType::kWorker, 4});
  objects.services.erase({ReplicaType::kWorker, 3});
  objects.services.erase({ReplicaType::kWorker, 2});
  EXPECT_TRUE(StrayServicesToDelete(job, objects).empty());
}

TEST(ServicePlannerTest, PerJobModeHasOneServiceNamedAsTheJob) {
  api::TrainingJob job = Job(1, 2);
  job.spec.service_mode = api::ServiceMode::kPerJob;
  JobObjects objects;
  objects.services[{ReplicaType::kWorker, 0}] = Service("worker", 0);  // not wanted, not created
  const std::vector<ServiceToCreate> missing = MissingServices(job, objects);
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0].name, "j");
  EXPECT_FALSE(missing[0].replica.has_value());
  objects.job_service = Service("worker", 0);
  EXPECT_TRUE(MissingServices(job, objects).empty());
}

}  // namespace
}  // namespace kubetrain::controller
