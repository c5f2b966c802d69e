#include "operator/webhook/elastic_admission.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "api/training_job.h"

namespace kubetrain::webhook {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr char kElastic[] = R"(
apiVersion: kubetrain.io/v1alpha1
kind: TrainingJob
metadata: {name: fm, namespace: team}
spec:
  elasticPolicy: {minReplicas: 2, maxReplicas: 4}
  replicaSpecs:
    Worker:
      replicas: 3
      template: {spec: {containers: [{name: main, image: kubetrain}]}}
)";

api::TrainingJob Job(const char* text = kElastic) {
  absl::StatusOr<api::TrainingJob> j = api::LoadTrainingJob(text, "job.yaml");
  EXPECT_TRUE(j.ok()) << j.status();
  return *j;
}

AdmissionRequest ScaleRequest(int64_t replicas) {
  AdmissionRequest r;
  r.uid = "u1";
  r.kind_group = "autoscaling";
  r.kind_version = "v1";
  r.kind = "Scale";
  r.resource_group = "kubetrain.io";
  r.resource = "trainingjobs";
  r.sub_resource = "scale";
  r.operation = "UPDATE";
  r.ns = "team";
  r.name = "fm";
  r.object = {{"apiVersion", "autoscaling/v1"},
              {"kind", "Scale"},
              {"metadata", {{"name", "fm"}, {"namespace", "team"}}},
              {"spec", {{"replicas", replicas}}}};
  r.old_object = r.object;
  r.old_object["spec"]["replicas"] = 3;
  return r;
}

AdmissionRequest ObjectUpdate(const api::TrainingJob& before, const api::TrainingJob& after) {
  AdmissionRequest r;
  r.uid = "u2";
  r.resource_group = "kubetrain.io";
  r.resource = "trainingjobs";
  r.operation = "UPDATE";
  r.ns = "team";
  r.name = "fm";
  r.object = api::ToJson(after);
  r.old_object = api::ToJson(before);
  return r;
}

JobLookup Finds(api::TrainingJob job, int* calls = nullptr) {
  return [job, calls](const std::string& ns,
                      const std::string& name) -> absl::StatusOr<api::TrainingJob> {
    if (calls != nullptr) ++*calls;
    if (ns != "team" || name != "fm") return absl::NotFoundError("no such job");
    return job;
  };
}

TEST(ElasticAdmissionTest, AScaleWithinTheBoundsIsAllowedAndOneOutsideIsRefusedNamingTheBound) {
  int calls = 0;
  const JobLookup lookup = Finds(Job(), &calls);
  for (int n : {2, 3, 4}) {
    AdmissionVerdict v = ReviewTrainingJob(ScaleRequest(n), lookup);
    EXPECT_TRUE(v.allowed) << n << ": " << v.message;
  }
  AdmissionVerdict above = ReviewTrainingJob(ScaleRequest(6), lookup);
  EXPECT_FALSE(above.allowed);
  EXPECT_EQ(above.code, 422);
  EXPECT_EQ(above.reason, "Invalid");
  EXPECT_EQ(above.field, "spec.replicas");
  EXPECT_EQ(above.message,
            "spec.replicas: Invalid value: 6: 6 is above spec.elasticPolicy.maxReplicas 4");
  EXPECT_EQ(above.detail, "Invalid value: 6: 6 is above spec.elasticPolicy.maxReplicas 4");
  AdmissionVerdict below = ReviewTrainingJob(ScaleRequest(1), lookup);
  EXPECT_FALSE(below.allowed);
  EXPECT_THAT(below.message, HasSubstr("1 is below spec.elasticPolicy.minReplicas 2"));
  AdmissionVerdict huge = ReviewTrainingJob(ScaleRequest(int64_t{1} << 40), lookup);
  EXPECT_FALSE(huge.allowed);
  EXPECT_EQ(calls, 6);
}

TEST(ElasticAdmissionTest, AJobThatIsNotElasticOrNotThereOrUnreadableIsNotRefused) {
  api::TrainingJob fixed = Job();
  fixed.spec.elastic_policy.reset();
  EXPECT_TRUE(ReviewTrainingJob(ScaleRequest(9), Finds(fixed)).allowed);
  AdmissionRequest other = ScaleRequest(9);
  other.name = "gone";
  EXPECT_TRUE(ReviewTrainingJob(other, Finds(Job())).allowed);
  // Fails open with a warning: the operator's clamp still holds the bound.
  AdmissionVerdict unread = ReviewTrainingJob(
      ScaleRequest(9),
      [](const std::string&, const std::string&) -> absl::StatusOr<api::TrainingJob> {
        return absl::UnavailableError("connection refused");
      });
  EXPECT_TRUE(unread.allowed);
  ASSERT_EQ(unread.warnings.size(), 1u);
  EXPECT_THAT(unread.warnings[0], HasSubstr("connection refused"));
  EXPECT_THAT(unread.warnings[0], HasSubstr("team/fm"));
}

TEST(ElasticAdmissionTest, AnEditOfTheSpecIsCheckedOnlyWhenWorkersOrThePolicyChange) {
  const api::TrainingJob before = Job();
  api::TrainingJob more = before;
  more.spec.replica_specs[api::ReplicaType::kWorker].replicas = 5;
  AdmissionVerdict v = ReviewTrainingJob(ObjectUpdate(before, more), Finds(before));
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.field, "spec.replicaSpecs.Worker.replicas");
  EXPECT_EQ(v.message,
            "spec.replicaSpecs.Worker.replicas: Invalid value: 5: 5 is above "
            "spec.elasticPolicy.maxReplicas 4");
  // Lowering maxReplicas under the running count is refused too...
  api::TrainingJob tighter = before;
  tighter.spec.elastic_policy->max_replicas = 2;
  EXPECT_FALSE(ReviewTrainingJob(ObjectUpdate(before, tighter), Finds(before)).allowed);
  // ...and raising both together is allowed.
  api::TrainingJob wider = more;
  wider.spec.elastic_policy->max_replicas = 8;
  EXPECT_TRUE(ReviewTrainingJob(ObjectUpdate(before, wider), Finds(before)).allowed);
  // An unrelated edit of a job already outside its bounds is not blocked.
  api::TrainingJob outside = before;
  outside.spec.replica_specs[api::ReplicaType::kWorker].replicas = 7;
  api::TrainingJob relabelled = outside;
  relabelled.metadata.labels["team"] = "vision";
  EXPECT_TRUE(ReviewTrainingJob(ObjectUpdate(outside, relabelled), Finds(outside)).allowed);
}

TEST(ElasticAdmissionTest, OtherOperationsResourcesAndSubresourcesAreAllowed) {
  AdmissionRequest create = ScaleRequest(9);
  create.operation = "CREATE";
  EXPECT_TRUE(ReviewTrainingJob(create, Finds(Job())).allowed);
  AdmissionRequest status = ScaleRequest(9);
  status.sub_resource = "status";
  EXPECT_TRUE(ReviewTrainingJob(status, Finds(Job())).allowed);
  AdmissionRequest deployment = ScaleRequest(9);
  deployment.resource_group = "apps";
  deployment.resource = "deployments";
  EXPECT_TRUE(ReviewTrainingJob(deployment, Finds(Job())).allowed);
  // A spec that does not parse is the schema's and the operator's to report.
  AdmissionRequest garbled = ObjectUpdate(Job(), Job());
  garbled.object["spec"]["replicaSpecs"] = "nonsense";
  EXPECT_TRUE(ReviewTrainingJob(garbled, Finds(Job())).allowed);
}

}  // namespace
}  // namespace kubetrain::webhook
