// The real reader (KubeClusterReader over KubeClient) against the API
// emulator: pod discovery by the job's label selector, and describe from a
// TrainingJob whose status went through the CRD's schema, its pods and
// Events. (pods/log and the pod proxy are served by the emulator only
// later: the log and top paths are tested with the fake reader.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "operator/kube/object.h"
#include "operator/kube/resource.h"
#include "testing/kube_test_target.h"
#include "tools/kubectl_kubetrain/describe_command.h"
#include "tools/kubectl_kubetrain/kube_cluster_reader.h"
#include "tools/kubectl_kubetrain/replica_ref.h"

namespace kubetrain::kubectl_plugin {
namespace {

using kube::Json;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

Json Pod(const std::string& job, const std::string& type, int index) {
  return {{"metadata",
           {{"name", job + "-" + type + "-" + std::to_string(index)},
            {"labels",
             {{"kubetrain.io/job-name", job},
              {"kubetrain.io/replica-type", type},
              {"kubetrain.io/replica-index", std::to_string(index)}}}}},
          {"spec", {{"containers", {{{"name", "kubetrain"}, {"image", "kubetrain:test"}}}}}}};
}

class PluginEmulatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<testing::KubeTestTarget>> target =
        testing::KubeTestTarget::Create();
    ASSERT_TRUE(target.ok()) << target.status();
    target_ = *std::move(target);
  }
  kube::KubeClient& client() { return target_->client(); }
  const std::string& ns() { return target_->ns(); }

  std::unique_ptr<testing::KubeTestTarget> target_;
};

TEST_F(PluginEmulatorTest, FindsTheJobsPodsByLabelAndDescribesIt) {
  Json worker{
      {"replicas", 2},
      {"template",
       {{"spec", {{"containers", {{{"name", "kubetrain"}, {"image", "kubetrain:test"}}}}}}}}};
  absl::StatusOr<Json> job = client().Create(
      kube::kTrainingJobs, ns(),
      Json{{"metadata", {{"name", "fm"}}}, {"spec", {{"replicaSpecs", {{"Worker", worker}}}}}});
  ASSERT_TRUE(job.ok()) << job.status();
  Json with_status = *job;
  with_status["status"] = Json::parse(R"({
      "conditions": [{"type": "Created", "status": "True", "reason": "TrainingJobCreated",
                      "message": "created", "lastTransitionTime": "2026-11-22T07:00:00Z"},
                     {"type": "Restarting", "status": "True", "reason": "OOMKilled",
                      "message": "worker-1 (pod fm-worker-1 on node-b) was OOMKilled",
                      "lastTransitionTime": "2026-11-22T07:40:00Z"}],
      "lastFailure": {"replicaType": "Worker", "replicaIndex": 1, "pod": "fm-worker-1",
                      "node": "node-b", "exitCode": 137, "reason": "OOMKilled",
                      "message": "out of memory", "time": "2026-11-22T07:40:00Z"},
      "replicaStatuses": {"Worker": {"active": 2, "failed": 1, "restarts": 1}},
      "restartCount": 1,
      "progress": {"step": 300, "loss": 0.5}})");
  ASSERT_TRUE(client().UpdateStatus(kube::kTrainingJobs, with_status).ok());
  for (const Json& pod :
       {Pod("fm", "worker", 0), Pod("fm", "worker", 1), Pod("fmx", "worker", 0)}) {
    ASSERT_TRUE(client().Create(kube::kPods, ns(), pod).ok());
  }
  Json event{{"metadata", {{"name", "fm.1"}}},
             {"involvedObject",
              {{"kind", "TrainingJob"},
               {"name", "fm"},
               {"namespace", ns()},
               {"apiVersion", "kubetrain.io/v1alpha1"}}},
             {"reason", "OOMKilled"},
             {"message", "worker-1 was OOMKilled"},
             {"type", "Warning"},
             {"lastTimestamp", "2026-11-22T07:40:00Z"},
             {"count", 1}};
  ASSERT_TRUE(client().Create(kube::kEvents, ns(), event).ok());

  KubeClusterReader reader(client(), client());
  absl::StatusOr<std::vector<Json>> pods = reader.ListPods(ns(), JobPodSelector("fm"));
  ASSERT_TRUE(pods.ok()) << pods.status();
  std::vector<std::string> names;
  for (const Json& pod : *pods) names.push_back(kube::Name(pod));
  EXPECT_THAT(names, UnorderedElementsAre("fm-worker-0", "fm-worker-1"));

  absl::StatusOr<std::string> screen =
      DescribeJob(reader, ns(), "fm", absl::ToUnixMicros(absl::Now()));
  ASSERT_TRUE(screen.ok()) << screen.status();
  EXPECT_THAT(*screen, HasSubstr("Phase:        Restarting\n"));
  EXPECT_THAT(*screen, HasSubstr("  Replica:    worker-1\n"));
  EXPECT_THAT(*screen, HasSubstr("  Exit code:  137\n"));
  EXPECT_THAT(*screen, HasSubstr("  Worker  2       0      0          1       1\n"));
  EXPECT_THAT(*screen, HasSubstr("Progress:     step 300  loss 0.5\n"));
  EXPECT_THAT(*screen, HasSubstr("worker-1  fm-worker-1"));
  EXPECT_THAT(*screen, ::testing::Not(HasSubstr("fmx-worker-0")));
  EXPECT_THAT(*screen, HasSubstr("Warning  OOMKilled  trainingjob/fm  worker-1 was OOMKilled"));

  EXPECT_TRUE(absl::IsNotFound(DescribeJob(reader, ns(), "nope", 0).status()));
}

}  // namespace
}  // namespace kubetrain::kubectl_plugin
