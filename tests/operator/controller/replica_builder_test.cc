// The Pods, Services, Secret and PodGroup the operator builds for a
// TrainingJob, checked field by field against the contract in
// replica_builder.h and docs/operator.md.
#include "operator/controller/replica_builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "api/cluster_spec.h"
#include "api/labels.h"

namespace kubetrain::controller {
namespace {

constexpr char kJob[] = R"yaml(
apiVersion: kubetrain.io/v1alpha1
kind: TrainingJob
metadata: {name: fmnist, namespace: team, uid: 0123456789abcdef}
spec:
  replicaSpecs:
    PS:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: trainer
            image: kubetrain:latest
            args: [train]
    Worker:
      replicas: 2
      restartPolicy: ExitCode
      template:
        metadata:
          labels: {team: vision, kubetrain.io/replica-index: "9"}
          annotations: {note: kept}
        spec:
          nodeSelector: {gpu: "true"}
          containers:
          - name: trainer
            image: kubetrain:latest
            env: [{name: BATCH, value: "$(KUBETRAIN_REPLICA_INDEX)"}]
            resources: {limits: {cpu: "2", memory: 4Gi}, requests: {cpu: "1"}}
            terminationMessagePolicy: File
            ports: [{name: kt-metrics, containerPort: 9000}]
          - name: sidecar
            image: busybox
)yaml";

// `extra_spec`: more of the spec, e.g. "  runPolicy: {...}\n".
api::TrainingJob Job(const std::string& extra_spec = "") {
  absl::StatusOr<api::TrainingJob> job =
      api::ParseTrainingJob(std::string(kJob) + extra_spec, "job.yaml");
  EXPECT_TRUE(job.ok()) << job.status();
  api::ApplyDefaults(*job);
  return *job;
}

Json JobJson(const api::TrainingJob& job) { return api::ToJson(job); }

// The env entry `name` of `container` ("<absent>" when none).
Json Env(const Json& container, const std::string& name) {
  for (const Json& e : container["env"]) {
    if (e.value("name", "") == name) return e;
  }
  return "<absent>";
}

TEST(ReplicaBuilderTest, PodCarriesNameLabelsAndOwner) {
  const api::TrainingJob job = Job();
  const Json pod = BuildPod(job, JobJson(job), api::ReplicaType::kWorker, 1, {});
  EXPECT_EQ(pod["apiVersion"], "v1");
  EXPECT_EQ(pod["kind"], "Pod");
  EXPECT_EQ(pod["metadata"]["name"], "fmnist-worker-1");
  EXPECT_EQ(pod["metadata"]["namespace"], "team");
  const Json& labels = pod["metadata"]["labels"];
  EXPECT_EQ(labels[api::kLabelJobName], "fmnist");
  EXPECT_EQ(labels[api::kLabelReplicaType], "worker");
  // The operator's labels win over the template's.
  EXPECT_EQ(labels[api::kLabelReplicaIndex], "1");
  EXPECT_EQ(labels["team"], "vision");
  EXPECT_EQ(pod["metadata"]["ownerReferences"], Json::parse(R"json([
    {"apiVersion": "kubetrain.io/v1alpha1", "kind": "TrainingJob", "name": "fmnist",
     "uid": "0123456789abcdef", "controller": true, "blockOwnerDeletion": true}])json"));
  const Json& annotations = pod["metadata"]["annotations"];
  EXPECT_EQ(annotations["note"], "kept");
  EXPECT_EQ(annotations[api::kPrometheusScrapeAnnotation], "true");
  EXPECT_EQ(annotations[api::kPrometheusPortAnnotation], api::kMetricsPortString);
  EXPECT_EQ(annotations[api::kPrometheusPathAnnotation], api::kMetricsPath);
}

TEST(ReplicaBuilderTest, ChiefRoleLabel) {
  api::TrainingJob job = Job();
  // Without a Chief, worker-0 plays its part.
  EXPECT_EQ(BuildPod(job, JobJson(job), api::ReplicaType::kWorker, 0,
                     {})["metadata"]["labels"][api::kLabelJobRole],
            "chief");
  job.spec.replica_specs[api::ReplicaType::kChief] = job.spec.replica_specs[api::ReplicaType::kPS];
  const Json chief = BuildPod(job, JobJson(job), api::ReplicaType::kChief, 0, {});
  EXPECT_EQ(chief["metadata"]["labels"][api::kLabelJobRole], "chief");
  const Json worker = BuildPod(job, JobJson(job), api::ReplicaType::kWorker, 0, {});
  EXPECT_FALSE(worker["metadata"]["labels"].contains(api::kLabelJobRole));
}

TEST(ReplicaBuilderTest, RestartPolicyIsThePodsOwnOnlyWhereTheKubeletRestarts) {
  EXPECT_EQ(PodRestartPolicy(api::RestartPolicy::kAlways), "Always");
  EXPECT_EQ(PodRestartPolicy(api::RestartPolicy::kOnFailure), "OnFailure");
  EXPECT_EQ(PodRestartPolicy(api::RestartPolicy::kNever), "Never");
  // ExitCode: the operator recreates the pod; the kubelet must not restart it.
  EXPECT_EQ(PodRestartPolicy(api::RestartPolicy::kExitCode), "Never");
  const api::TrainingJob job = Job();
  EXPECT_EQ(BuildPod(job, JobJson(job), api::ReplicaType::kPS, 0, {})["spec"]["restartPolicy"],
            "OnFailure");
  EXPECT_EQ(BuildPod(job, JobJson(job), api::ReplicaType::kWorker, 0, {})["spec"]["restartPolicy"],
            "Never");
}

TEST(ReplicaBuilderTest, FirstContainerGetsTheReplicaEnvironmentFirst) {
  const api::TrainingJob job = Job();
  const Json pod = BuildPod(job, JobJson(job), api::ReplicaType::kWorker, 1, {});
  const Json& spec = pod["spec"];
  EXPECT_EQ(spec["nodeSelector"]["gpu"], "true");  // the template's spec is kept
  ASSERT_EQ(spec["containers"].size(), 2u);
  const Json& trainer = spec["containers"][0];
  // TF_CONFIG and the rest exactly as the cluster spec renders them, in order.
  const api::ClusterSpec cluster = api::InClusterSpec(job);
  const api::EnvList env =
      api::ReplicaEnvironment(job, cluster, api::ReplicaType::kWorker, 1, /*job_token=*/"");
  ASSERT_GE(trainer["env"].size(), env.size() + 2);
  for (size_t i = 0; i < env.size(); ++i) {
    EXPECT_EQ(trainer["env"][i], (Json{{"name", env[i].first}, {"value", env[i].second}}));
  }
  EXPECT_NE(Env(trainer, "TF_CONFIG"), "<absent>");
  EXPECT_THAT(Env(trainer, "TF_CONFIG")["value"].get<std::string>(),
              ::testing::HasSubstr(R"("task":{"type":"worker","index":1})"));
  // The token comes from the job's Secret, never inline.
  EXPECT_EQ(Env(trainer, api::kEnvJobToken), Json::parse(R"json(
    {"name": "KUBETRAIN_JOB_TOKEN",
     "valueFrom": {"secretKeyRef": {"name": "fmnist-token-01234567", "key": "token"}}})json"));
  // The container's own variables come after, so $(VAR) resolves.
  EXPECT_EQ(trainer["env"].back(),
            Json::parse(R"json({"name": "BATCH", "value": "$(KUBETRAIN_REPLICA_INDEX)"})json"));
  // A sidecar is left alone.
  EXPECT_FALSE(spec["containers"][1].contains("env"));
  EXPECT_FALSE(spec["containers"][1].contains("terminationMessagePolicy"));
}

TEST(ReplicaBuilderTest, ResourcesAndTerminationMessagePolicy) {
  const api::TrainingJob job = Job();
  const Json worker = BuildPod(job, JobJson(job), api::ReplicaType::kWorker, 0, {});
  const Json& trainer = worker["spec"]["containers"][0];
  EXPECT_EQ(trainer["resources"], Json::parse(R"json(
    {"limits": {"cpu": "2", "memory": "4Gi"}, "requests": {"cpu": "1"}})json"));
  // The template's policy is kept; without one, the last log lines.
  EXPECT_EQ(trainer["terminationMessagePolicy"], "File");
  const Json ps = BuildPod(job, JobJson(job), api::ReplicaType::kPS, 0, {});
  EXPECT_EQ(ps["spec"]["containers"][0]["terminationMessagePolicy"], "FallbackToLogsOnError");
  EXPECT_FALSE(ps["spec"]["containers"][0].contains("resources"));
}

TEST(ReplicaBuilderTest, PortsTheRuntimeServesOn) {
  const api::TrainingJob job = Job();
  const Json ps = BuildPod(job, JobJson(job), api::ReplicaType::kPS, 0, {});
  const Json& ports = ps["spec"]["containers"][0]["ports"];
  std::map<std::string, int> by_name;
  for (const Json& p : ports) by_name[p.value("name", "")] = p.value("containerPort", 0);
  // The defaulted kubetrain-port and the named metrics port.
  EXPECT_EQ(by_name, (std::map<std::string, int>{{api::kPortName, api::kDefaultPort},
                                                 {api::kMetricsPortName, api::kMetricsPort}}));
  EXPECT_THAT(ports, ::testing::Contains(Json{{"name", api::kMetricsPortName},
                                              {"containerPort", api::kMetricsPort},
                                              {"protocol", "TCP"}}));
  // A template that declares the metrics port by name keeps its own entry.
  const Json worker = BuildPod(job, JobJson(job), api::ReplicaType::kWorker, 0, {});
  int metrics = 0;
  for (const Json& p : worker["spec"]["containers"][0]["ports"]) {
    if (p.value("name", "") == api::kMetricsPortName) {
      ++metrics;
      EXPECT_EQ(p["containerPort"], 9000);
    }
  }
  EXPECT_EQ(metrics, 1);
}

TEST(ReplicaBuilderTest, PerJobServiceModeSetsHostnameAndSubdomain) {
  api::TrainingJob job = Job();
  EXPECT_FALSE(
      BuildPod(job, JobJson(job), api::ReplicaType::kPS, 0, {})["spec"].contains("hostname"));
  job.spec.service_mode = api::ServiceMode::kPerJob;
  const Json pod = BuildPod(job, JobJson(job), api::ReplicaType::kWorker, 1, {});
  EXPECT_EQ(pod["spec"]["hostname"], "fmnist-worker-1");
  EXPECT_EQ(pod["spec"]["subdomain"], "fmnist");
  const Json svc = BuildJobService(job, JobJson(job));
  EXPECT_EQ(svc["metadata"]["name"], "fmnist");
  EXPECT_EQ(svc["spec"]["clusterIP"], "None");
  EXPECT_EQ(svc["spec"]["selector"], (Json{{api::kLabelJobName, "fmnist"}}));
  EXPECT_EQ(svc["spec"]["ports"], Json::parse(R"json(
    [{"name": "kubetrain-port", "port": 2222, "targetPort": 2222, "protocol": "TCP"}])json"));
}

TEST(ReplicaBuilderTest, HeadlessServicePerReplica) {
  const api::TrainingJob job = Job();
  const Json svc = BuildService(job, JobJson(job), api::ReplicaType::kWorker, 1);
  EXPECT_EQ(svc["kind"], "Service");
  EXPECT_EQ(svc["metadata"]["name"], "fmnist-worker-1");
  EXPECT_EQ(svc["metadata"]["ownerReferences"][0]["uid"], "0123456789abcdef");
  EXPECT_EQ(svc["spec"]["clusterIP"], "None");
  EXPECT_EQ(svc["spec"]["publishNotReadyAddresses"], true);
  EXPECT_EQ(svc["spec"]["selector"], (Json{{api::kLabelJobName, "fmnist"},
                                           {api::kLabelReplicaType, "worker"},
                                           {api::kLabelReplicaIndex, "1"}}));
  EXPECT_EQ(svc["spec"]["ports"], Json::parse(R"json(
    [{"name": "kubetrain-port", "port": 2222, "targetPort": 2222, "protocol": "TCP"}])json"));
}

TEST(ReplicaBuilderTest, TokenSecretBelongsToThisIncarnation) {
  api::TrainingJob job = Job();
  EXPECT_EQ(TokenSecretName(job), "fmnist-token-01234567");
  const Json secret = BuildTokenSecret(job, JobJson(job), "s3cret");
  EXPECT_EQ(secret["metadata"]["name"], "fmnist-token-01234567");
  EXPECT_EQ(secret["type"], "Opaque");
  EXPECT_EQ(secret["data"][kTokenSecretKey], "czNjcmV0");  // base64
  EXPECT_EQ(secret["metadata"]["ownerReferences"][0]["controller"], true);
  job.metadata.uid.clear();
  EXPECT_EQ(TokenSecretName(job), "fmnist-token");
}

TEST(ReplicaBuilderTest, GangSchedulingWithVolcano) {
  api::TrainingJob job = Job();
  const Json plain = BuildPod(job, JobJson(job), api::ReplicaType::kWorker, 0, {"volcano"});
  EXPECT_FALSE(plain["spec"].contains("schedulerName"));  // no schedulingPolicy
  job = Job("  runPolicy: {schedulingPolicy: {queue: q}}\n");
  const Json pod = BuildPod(job, JobJson(job), api::ReplicaType::kWorker, 0, {"volcano"});
  EXPECT_EQ(pod["spec"]["schedulerName"], "volcano");
  EXPECT_EQ(pod["metadata"]["annotations"][kVolcanoGroupAnnotation], "fmnist");
  EXPECT_EQ(pod["metadata"]["annotations"]["volcano.sh/task-spec"], "worker");
  const Json group = BuildPodGroup(job, JobJson(job));
  EXPECT_EQ(group["spec"], Json::parse(R"json({"minMember": 3, "queue": "q"})json"));
}

}  // namespace
}  // namespace kubetrain::controller
