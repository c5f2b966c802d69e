// The observe step: a job's pods and Services from the caches, by replica.
#include "operator/controller/job_objects.h"

#include <gtest/gtest.h>

#include <set>

#include "operator/kube/object.h"
#include "tests/operator/controller/planner_test_objects.h"

namespace kubetrain::controller {
namespace {

using namespace testing_objects;  // NOLINT(build/namespaces)

TEST(JobObjectsTest, SortsTheJobsObjectsByReplica) {
  const api::TrainingJob job = Job(1, 2);
  kube::ObjectCache pods, services;
  pods.Upsert(Pod("ps", 0));
  pods.Upsert(Pod("worker", 1));
  pods.Upsert(Pod("worker", 2));  // beyond replicas: scaled down
  Json unlabelled = *Pod("worker", 0);
  unlabelled["metadata"]["labels"].erase(api::kLabelReplicaIndex);
  unlabelled["metadata"]["name"] = "j-odd";
  pods.Upsert(std::make_shared<const Json>(unlabelled));
  Json foreign = *Pod("worker", 0);
  foreign["metadata"]["name"] = "other-worker-0";
  foreign["metadata"]["ownerReferences"][0]["controller"] = false;  // not its controller
  pods.Upsert(std::make_shared<const Json>(foreign));
  services.Upsert(Service("worker", 0));
  Json job_service = *Service("worker", 0);
  job_service["metadata"]["name"] = "j";
  job_service["metadata"]["labels"].erase(api::kLabelReplicaType);
  services.Upsert(std::make_shared<const Json>(job_service));

  const JobObjects objects = CollectJobObjects(job, "job-uid", pods, services);
  ASSERT_EQ(objects.pods.size(), 2u);
  EXPECT_EQ(kube::Name(*objects.pods.at({api::ReplicaType::kPS, 0})), "j-ps-0");
  EXPECT_EQ(kube::Name(*objects.pods.at({api::ReplicaType::kWorker, 1})), "j-worker-1");
  std::set<std::string> strays;
  for (const auto& p : objects.stray_pods) strays.insert(kube::Name(*p));
  EXPECT_EQ(strays, (std::set<std::string>{"j-worker-2", "j-odd"}));
  ASSERT_EQ(objects.services.size(), 1u);
  EXPECT_EQ(kube::Name(*objects.services.at({api::ReplicaType::kWorker, 0})), "j-worker-0");
  ASSERT_NE(objects.job_service, nullptr);
  EXPECT_EQ(kube::Name(*objects.job_service), "j");

  EXPECT_TRUE(CollectJobObjects(job, "other-uid", pods, services).pods.empty());
}

}  // namespace
}  // namespace kubetrain::controller
