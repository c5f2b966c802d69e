#include "operator/controller/cache_trim.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "api/replica_policy.h"
#include "operator/controller/pod_status.h"
#include "operator/kube/object.h"
#include "operator/kube/object_cache.h"

namespace kubetrain::controller {
namespace {

using Json = nlohmann::json;

// A pod as a real API server returns it once the kubelet has run it: what
// the operator wrote, the server's defaults and bookkeeping, a status.
Json ServerPod(const Json& status) {
  Json env = Json::array();
  for (int i = 0; i < 20; ++i) {
    env.push_back({{"name", "VAR_" + std::to_string(i)}, {"value", std::string(200, 'x')}});
  }
  return Json{{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", "job-worker-1"},
                {"namespace", "ns"},
                {"uid", "pod-uid"},
                {"resourceVersion", "42"},
                {"generation", 1},
                {"selfLink", "/api/v1/namespaces/ns/pods/job-worker-1"},
                {"creationTimestamp", "2026-11-24T10:00:00Z"},
                {"labels", {{"kubetrain.io/job-name", "job"}, {"kubetrain.io/replica-index", "1"}}},
                {"annotations",
                 {{"prometheus.io/port", "9090"},
                  {"kubectl.kubernetes.io/last-applied-configuration", std::string(500, 'y')}}},
                {"ownerReferences", Json::array({{{"apiVersion", "kubetrain.io/v1alpha1"},
                                                  {"kind", "TrainingJob"},
                                                  {"name", "job"},
                                                  {"uid", "job-uid"},
                                                  {"controller", true}}})},
                {"managedFields", Json::array({{{"manager", "kubetrain-operator"}}})}}},
              {"spec",
               {{"containers", Json::array({{{"name", "kubetrain"},
                                             {"image", "kubetrain:1"},
                                             {"env", env},
                                             {"terminationMessagePath", "/dev/termination-log"}},
                                            {{"name", "sidecar"}, {"image", "sidecar:1"}}})},
                {"volumes", Json::array({{{"name", "token"}, {"secret", {{"secretName", "s"}}}}})},
                {"tolerations", Json::array({{{"key", "a"}}, {{"key", "b"}}})},
                {"nodeName", "node-b"},
                {"restartPolicy", "Never"}}},
              {"status", status}};
}

TEST(CacheTrimTest, PodKeepsWhatTheControllerReadsAndDropsTheRest) {
  const Json status{
      {"phase", "Failed"},
      {"reason", "Evicted"},
      {"message", "The node was low on resource: memory."},
      {"podIP", "10.0.0.7"},
      {"hostIP", "192.168.0.1"},
      {"qosClass", "BestEffort"},
      {"conditions",
       Json::array(
           {{{"type", "Ready"}, {"status", "True"}, {"lastTransitionTime", "2026-11-24T10:00:01Z"}},
            {{"type", "PodScheduled"}, {"status", "True"}},
            {{"type", "DisruptionTarget"},
             {"status", "True"},
             {"reason", "TerminationByKubelet"},
             {"message", "The node was low on resource: memory."},
             {"lastTransitionTime", "2026-11-24T10:00:03Z"}}})},
      {"containerStatuses",
       Json::array({{{"name", "sidecar"}, {"restartCount", 1}, {"image", "sidecar:1"}},
                    {{"name", "kubetrain"},
                     {"restartCount", 3},
                     {"image", "kubetrain:1"},
                     {"imageID", "docker-pullable://kubetrain@sha256:abc"},
                     {"containerID", "containerd://123"},
                     {"state",
                      {{"terminated",
                        {{"exitCode", 137},
                         {"reason", "OOMKilled"},
                         {"message", "kubetrain: error: out of memory"},
                         {"startedAt", "2026-11-24T10:00:02Z"}}}}},
                     {"lastState", {{"running", {{"startedAt", "x"}}}}}}})}};
  const Json full = ServerPod(status);
  Json trimmed = full;
  TrimCachedPod(trimmed);

  // Every reading the controller makes gives the same answer.
  EXPECT_EQ(PodPhase(trimmed), PodPhase(full));
  EXPECT_EQ(PodReady(trimmed), PodReady(full));
  EXPECT_TRUE(PodReady(trimmed));
  EXPECT_EQ(ContainerRestarts(trimmed), ContainerRestarts(full));
  EXPECT_EQ(ContainerRestarts(trimmed), 4);
  std::string full_detail, trimmed_detail;
  EXPECT_EQ(FailedPodExit(trimmed, &trimmed_detail).EffectiveCode(),
            FailedPodExit(full, &full_detail).EffectiveCode());
  EXPECT_EQ(FailedPodExit(trimmed, &trimmed_detail).EffectiveCode(), 137);
  EXPECT_EQ(trimmed_detail, full_detail);
  EXPECT_EQ(kube::Name(trimmed), "job-worker-1");
  EXPECT_EQ(kube::Namespace(trimmed), "ns");
  EXPECT_EQ(kube::Uid(trimmed), "pod-uid");
  EXPECT_EQ(kube::ResourceVersionOf(trimmed), "42");
  EXPECT_EQ(kube::Label(trimmed, "kubetrain.io/replica-index"), "1");
  EXPECT_EQ(kube::Annotation(trimmed, "prometheus.io/port"), "9090");
  ASSERT_TRUE(kube::ControllerUid(trimmed));
  EXPECT_EQ(*kube::ControllerUid(trimmed), "job-uid");
  EXPECT_EQ(kube::StringAt(trimmed, {"status", "podIP"}), "10.0.0.7");
  // The failure's classification reads the condition, the pod's message,
  // the termination message and the node.
  const PodFailure want = ClassifyFailedPod(full), got = ClassifyFailedPod(trimmed);
  EXPECT_EQ(got.reason, want.reason);
  EXPECT_EQ(got.reason, api::FailureReason::kEvicted);
  EXPECT_EQ(got.message, want.message);
  EXPECT_EQ(got.node, "node-b");

  // What it never reads is gone.
  EXPECT_EQ(trimmed["spec"],
            (Json{{"containers", Json::array({{{"name", "kubetrain"}}, {{"name", "sidecar"}}})},
                  {"nodeName", "node-b"}}));
  EXPECT_FALSE(trimmed["status"]["conditions"][0].contains("lastTransitionTime"));
  EXPECT_FALSE(trimmed["status"]["conditions"][2].contains("lastTransitionTime"));
  EXPECT_FALSE(trimmed["metadata"].contains("managedFields"));
  EXPECT_FALSE(trimmed["metadata"].contains("selfLink"));
  EXPECT_FALSE(trimmed["metadata"]["annotations"].contains(
      "kubectl.kubernetes.io/last-applied-configuration"));
  EXPECT_FALSE(trimmed["status"].contains("hostIP"));
  EXPECT_FALSE(trimmed["status"]["containerStatuses"][1].contains("imageID"));
  EXPECT_FALSE(
      trimmed["status"]["containerStatuses"][1]["state"]["terminated"].contains("startedAt"));
  EXPECT_EQ(trimmed["status"]["containerStatuses"][1]["lastState"], Json::object());
  EXPECT_LT(trimmed.dump().size() * 5, full.dump().size());
}

TEST(CacheTrimTest, TrimmedObjectsAreIndexedAsBefore) {
  Json pod = ServerPod(Json{{"phase", "Pending"}});
  TrimCachedPod(pod);
  Json service{{"apiVersion", "v1"},
               {"kind", "Service"},
               {"metadata",
                {{"name", "job-worker-1"},
                 {"namespace", "ns"},
                 {"uid", "svc-uid"},
                 {"resourceVersion", "43"},
                 {"labels", {{"kubetrain.io/job-name", "job"}}},
                 {"ownerReferences", Json::array({{{"uid", "job-uid"}, {"controller", true}}})}}},
               {"spec", {{"clusterIP", "None"}, {"ports", Json::array({{{"port", 2222}}})}}}};
  TrimCachedService(service);
  EXPECT_FALSE(service.contains("spec"));
  for (const Json& object : {pod, service}) {
    kube::ObjectCache cache;  // one per kind, as the informers have
    cache.Upsert(std::make_shared<const Json>(object));
    EXPECT_EQ(cache.ByIndex(kube::kIndexOwnerUid, "job-uid").size(), 1u);
    EXPECT_EQ(cache.ByIndex(kube::kIndexNamespace, "ns").size(), 1u);
    EXPECT_NE(cache.Get("ns/job-worker-1"), nullptr);
  }
}

// A Node as kubelet v1.20 reports it: only the Ready condition's verdict
// stays, not its heartbeat (which changes every few seconds), images,
// capacity or other conditions.
TEST(CacheTrimTest, NodeKeepsItsReadyVerdictOnly) {
  Json node{{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata",
             {{"name", "node-b"},
              {"uid", "node-uid"},
              {"resourceVersion", "7"},
              {"labels", {{"kubernetes.io/hostname", "node-b"}}},
              {"annotations", {{"node.alpha.kubernetes.io/ttl", "0"}}},
              {"creationTimestamp", "2026-11-24T09:00:00Z"}}},
            {"spec", {{"podCIDR", "10.244.1.0/24"}}},
            {"status",
             {{"capacity", {{"cpu", "8"}}},
              {"images", Json::array({{{"names", Json::array({"kubetrain:latest"})}}})},
              {"conditions", Json::array({{{"type", "MemoryPressure"}, {"status", "False"}},
                                          {{"type", "Ready"},
                                           {"status", "Unknown"},
                                           {"reason", "NodeStatusUnknown"},
                                           {"message", "Kubelet stopped posting node status."},
                                           {"lastHeartbeatTime", "2026-11-24T10:00:00Z"},
                                           {"lastTransitionTime", "2026-11-24T10:00:40Z"}}})}}}};
  TrimCachedNode(node);
  EXPECT_EQ(
      node,
      (Json{{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata",
             {{"name", "node-b"},
              {"uid", "node-uid"},
              {"resourceVersion", "7"},
              {"creationTimestamp", "2026-11-24T09:00:00Z"}}},
            {"status",
             {{"conditions", Json::array({{{"type", "Ready"},
                                           {"status", "Unknown"},
                                           {"reason", "NodeStatusUnknown"},
                                           {"message", "Kubelet stopped posting node status."},
                                           {"lastTransitionTime", "2026-11-24T10:00:40Z"}}})}}}}))
      << node.dump(2);
}

TEST(CacheTrimTest, OddShapesAreLeftAlone) {
  Json not_object = Json::array({1, 2});
  TrimCachedPod(not_object);
  EXPECT_EQ(not_object, Json::array({1, 2}));
  Json bare{{"metadata", {{"name", "p"}}}};
  TrimCachedPod(bare);
  EXPECT_EQ(bare, (Json{{"metadata", {{"name", "p"}}}}));
  Json odd_spec{{"metadata", {{"name", "p"}}}, {"spec", "text"}, {"status", 3}};
  TrimCachedPod(odd_spec);
  EXPECT_EQ(odd_spec["spec"], "text");
  EXPECT_EQ(odd_spec["status"], 3);
}

}  // namespace
}  // namespace kubetrain::controller
