// Pods, Services and jobs shaped as the informer caches hold them, for the
// planners' tests (pod_planner, service_planner, status_planner).
#ifndef KUBETRAIN_TESTS_OPERATOR_CONTROLLER_PLANNER_TEST_OBJECTS_H_
#define KUBETRAIN_TESTS_OPERATOR_CONTROLLER_PLANNER_TEST_OBJECTS_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "api/labels.h"
#include "api/training_job.h"
#include "operator/kube/object_cache.h"

namespace kubetrain::controller::testing_objects {

using Json = nlohmann::json;

// A job "j" (uid "job-uid") with `ps` PS and `workers` Workers.
inline api::TrainingJob Job(int ps, int workers) {
  const std::string text =
      absl::StrCat(R"(
apiVersion: kubetrain.io/v1alpha1
kind: TrainingJob
metadata: {name: j, namespace: ns, uid: job-uid}
spec:
  replicaSpecs:
    PS: {replicas: )",
                   ps, R"(, template: {spec: {containers: [{name: c, image: i}]}}}
    Worker: {replicas: )",
                   workers, R"(, template: {spec: {containers: [{name: c, image: i}]}}}
)");
  absl::StatusOr<api::TrainingJob> job = api::ParseTrainingJob(text, "job.yaml");
  EXPECT_TRUE(job.ok()) << job.status();
  api::ApplyDefaults(*job);
  return *job;
}

struct PodShape {
  std::string phase = "Running";
  bool ready = false;
  bool deleting = false;
};

// Replica `type`-`index` of job "j", owned by it.
inline kube::ObjectPtr Replica(const std::string& kind, const std::string& type, int index,
                               PodShape shape = {}) {
  Json o{{"apiVersion", "v1"}, {"kind", kind}};
  o["metadata"] = {{"name", absl::StrCat("j-", type, "-", index)},
                   {"namespace", "ns"},
                   {"uid", absl::StrCat(kind, "-", type, "-", index)},
                   {"labels",
                    {{api::kLabelJobName, "j"},
                     {api::kLabelReplicaType, type},
                     {api::kLabelReplicaIndex, absl::StrCat(index)}}},
                   {"ownerReferences", Json::array({{{"apiVersion", "kubetrain.io/v1alpha1"},
                                                     {"kind", "TrainingJob"},
                                                     {"name", "j"},
                                                     {"uid", "job-uid"},
                                                     {"controller", true}}})}};
  if (shape.deleting) o["metadata"]["deletionTimestamp"] = "2026-11-22T00:00:00Z";
  if (kind == "Pod") {
    o["status"] = {{"phase", shape.phase}};
    o["status"]["conditions"] =
        Json::array({{{"type", "Ready"}, {"status", shape.ready ? "True" : "False"}}});
  }
  return std::make_shared<const Json>(std::move(o));
}

inline kube::ObjectPtr Pod(const std::string& type, int index, PodShape shape = {}) {
  return Replica("Pod", type, index, shape);
}
inline kube::ObjectPtr Service(const std::string& type, int index) {
  return Replica("Service", type, index);
}

}  // namespace kubetrain::controller::testing_objects

#endif  // KUBETRAIN_TESTS_OPERATOR_CONTROLLER_PLANNER_TEST_OBJECTS_H_
