#include "api/cluster_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace kubetrain::api {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TrainingJob Load(const std::string& text) {
  absl::StatusOr<TrainingJob> job = LoadTrainingJob(text, "test.yaml");
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? *job : TrainingJob{};
}

constexpr char kPsJob[] = R"(
apiVersion: kubetrain.io/v1alpha1
kind: TrainingJob
metadata: {name: fmnist}
spec:
  replicaSpecs:
    PS:
      replicas: 1
      template: {spec: {containers: [{name: kubetrain, image: kubetrain:latest, ports: [{name: kubetrain-port, containerPort: 2222}]}]}}
    Worker:
      replicas: 2
      template: {spec: {containers: [{name: kubetrain, image: kubetrain:latest}]}}
)";

constexpr char kChiefJob[] = R"(
apiVersion: kubetrain.io/v1alpha1
kind: TrainingJob
metadata: {name: dist, namespace: ns3}
spec:
  replicaSpecs:
    Chief:
      template: {spec: {containers: [{name: kubetrain, image: img}]}}
    Worker:
      replicas: 2
      template: {spec: {containers: [{name: kubetrain, image: img}]}}
    Evaluator:
      template: {spec: {containers: [{name: kubetrain, image: img, ports: [{name: kubetrain-port, containerPort: 3000}]}]}}
)";

TEST(ClusterSpecTest, ReplicaNamesAndRoles) {
  const TrainingJob ps = Load(kPsJob);
  EXPECT_EQ(ReplicaName(ps, ReplicaType::kWorker, 1), "fmnist-worker-1");
  EXPECT_EQ(ReplicaName(ps, ReplicaType::kPS, 0), "fmnist-ps-0");
  EXPECT_TRUE(IsChiefRole(ps, ReplicaType::kWorker, 0));
  EXPECT_FALSE(IsChiefRole(ps, ReplicaType::kWorker, 1));
  EXPECT_FALSE(IsChiefRole(ps, ReplicaType::kPS, 0));
  const TrainingJob chief = Load(kChiefJob);
  EXPECT_TRUE(IsChiefRole(chief, ReplicaType::kChief, 0));
  EXPECT_FALSE(IsChiefRole(chief, ReplicaType::kWorker, 0));
  EXPECT_EQ(ReplicaName(chief, ReplicaType::kEvaluator, 0), "dist-evaluator-0");
  EXPECT_THAT(
      ReplicaLabels(ps, ReplicaType::kWorker, 0),
      ElementsAre(Pair("kubetrain.io/job-name", "fmnist"), Pair("kubetrain.io/job-role", "chief"),
                  Pair("kubetrain.io/replica-index", "0"),
                  Pair("kubetrain.io/replica-type", "worker")));
  EXPECT_EQ(ReplicaLabels(ps, ReplicaType::kWorker, 1).count("kubetrain.io/job-role"), 0u);
}

TEST(ClusterSpecTest, TfConfigForPsJobMatchesKubeflow) {
  const TrainingJob job = Load(kPsJob);
  const ClusterSpec cluster = InClusterSpec(job);
  EXPECT_EQ(TfConfigJson(cluster, ReplicaType::kWorker, 1),
            R"({"cluster":{"ps":["fmnist-ps-0.default.svc:2222"],)"
            R"("worker":["fmnist-worker-0.default.svc:2222","fmnist-worker-1.default.svc:2222"]},)"
            R"("task":{"type":"worker","index":1},"environment":"cloud"})");
  EXPECT_EQ(TfConfigJson(cluster, ReplicaType::kWorker, 0),
            R"({"cluster":{"ps":["fmnist-ps-0.default.svc:2222"],)"
            R"("worker":["fmnist-worker-0.default.svc:2222","fmnist-worker-1.default.svc:2222"]},)"
            R"("task":{"type":"worker","index":0},"environment":"cloud"})");
  EXPECT_EQ(TfConfigJson(cluster, ReplicaType::kPS, 0),
            R"({"cluster":{"ps":["fmnist-ps-0.default.svc:2222"],)"
            R"("worker":["fmnist-worker-0.default.svc:2222","fmnist-worker-1.default.svc:2222"]},)"
            R"("task":{"type":"ps","index":0},"environment":"cloud"})");
}

TEST(ClusterSpecTest, TfConfigWithChiefAndEvaluatorMatchesKubeflow) {
  // Kubeflow's current genClusterSpec keeps the evaluator in the cluster
  // (pod_test.go "should generate desired cluster spec") and names the chief
  // "chief"; keys are sorted.
  const TrainingJob job = Load(kChiefJob);
  const ClusterSpec cluster = InClusterSpec(job);
  const std::string c = R"({"cluster":{"chief":["dist-chief-0.ns3.svc:2222"],)"
                        R"("evaluator":["dist-evaluator-0.ns3.svc:3000"],)"
                        R"("worker":["dist-worker-0.ns3.svc:2222","dist-worker-1.ns3.svc:2222"]},)";
  EXPECT_EQ(TfConfigJson(cluster, ReplicaType::kChief, 0),
            c + R"("task":{"type":"chief","index":0},"environment":"cloud"})");
  EXPECT_EQ(TfConfigJson(cluster, ReplicaType::kEvaluator, 0),
            c + R"("task":{"type":"evaluator","index":0},"environment":"cloud"})");
  EXPECT_EQ(TfConfigJson(cluster, ReplicaType::kWorker, 1),
            c + R"("task":{"type":"worker","index":1},"environment":"cloud"})");
}

TEST(ClusterSpecTest, KubeflowTestCaseWithClusterDomain) {
  // The ns2 case of Kubeflow's TestClusterSpec: 1 worker + 1 PS with
  // CUSTOM_CLUSTER_DOMAIN=tf.training.org.
  const TrainingJob job = Load(R"(
apiVersion: kubetrain.io/v1alpha1
kind: TrainingJob
metadata: {name: test-tfjob, namespace: ns2}
spec:
  replicaSpecs:
    Worker: {template: {spec: {containers: [{name: t, image: i}]}}}
    PS: {template: {spec: {containers: [{name: t, image: i}]}}}
)");
  EXPECT_EQ(TfConfigJson(InClusterSpec(job, "tf.training.org"), ReplicaType::kWorker, 0),
            R"({"cluster":{"ps":["test-tfjob-ps-0.ns2.svc.tf.training.org:2222"],"worker":[")"
            R"(test-tfjob-worker-0.ns2.svc.tf.training.org:2222"]},"task":{"type":"worker",)"
            R"("index":0},"environment":"cloud"})");
}

TEST(ClusterSpecTest, PerJobServiceModeAddressesPodsUnderTheJobsService) {
  const TrainingJob job = Load(R"(
apiVersion: kubetrain.io/v1alpha1
kind: TrainingJob
metadata: {name: pj, namespace: ns2}
spec:
  serviceMode: PerJob
  replicaSpecs:
    Worker: {replicas: 2, template: {spec: {containers: [{name: t, image: i}]}}}
    PS: {template: {spec: {containers: [{name: t, image: i}]}}}
)");
  // <hostname>.<subdomain>.<ns>.svc: the pod's hostname under the job's
  // headless Service.
  EXPECT_EQ(TfConfigJson(InClusterSpec(job, "tf.training.org"), ReplicaType::kWorker, 1),
            R"({"cluster":{"ps":["pj-ps-0.pj.ns2.svc.tf.training.org:2222"],"worker":[")"
            R"(pj-worker-0.pj.ns2.svc.tf.training.org:2222","pj-worker-1.pj.ns2.svc.)"
            R"(tf.training.org:2222"]},"task":{"type":"worker","index":1},"environment":"cloud"})");
}

TEST(ClusterSpecTest, ClusterForUsesTheAddressFunction) {
  const TrainingJob job = Load(kPsJob);
  const ClusterSpec cluster = ClusterFor(job, [](ReplicaType t, int i) {
    return "127.0.0.1:" + std::to_string((t == ReplicaType::kPS ? 5000 : 6000) + i);
  });
  EXPECT_THAT(cluster.hosts,
              ElementsAre(Pair("ps", ElementsAre("127.0.0.1:5000")),
                          Pair("worker", ElementsAre("127.0.0.1:6000", "127.0.0.1:6001"))));
}

TEST(ClusterSpecTest, TfConfigEscapesLikeGo) {
  ClusterSpec cluster;
  cluster.hosts["worker"] = {"a<b>&\"c\\:1"};
  EXPECT_EQ(TfConfigJson(cluster, "worker", 0),
            R"({"cluster":{"worker":["a\u003cb\u003e\u0026\"c\\:1"]},)"
            R"("task":{"type":"worker","index":0},"environment":"cloud"})");
}

TEST(TfConfigTest, ParsesWhatItWrites) {
  const TrainingJob job = Load(kChiefJob);
  const ClusterSpec cluster = InClusterSpec(job);
  absl::StatusOr<TfConfig> parsed = ParseTfConfig(TfConfigJson(cluster, ReplicaType::kWorker, 1));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->cluster, cluster);
  EXPECT_EQ(parsed->task_type, "worker");
  EXPECT_EQ(parsed->task_index, 1);
  EXPECT_EQ(parsed->environment, "cloud");
}

TEST(TfConfigTest, AcceptsEvaluatorOutsideTheCluster) {
  absl::StatusOr<TfConfig> parsed =
      ParseTfConfig(R"({"cluster":{"worker":["w:1"]},"task":{"type":"evaluator","index":0}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->task_type, "evaluator");
  EXPECT_EQ(parsed->environment, "");
}

TEST(TfConfigTest, ClearErrors) {
  auto message = [](const std::string& text) {
    return std::string(ParseTfConfig(text).status().message());
  };
  EXPECT_THAT(message("not json"), HasSubstr("TF_CONFIG: not valid JSON"));
  EXPECT_THAT(message("[]"), HasSubstr("TF_CONFIG: (root): must be a JSON object"));
  EXPECT_THAT(message(R"({"task":{"type":"worker","index":0}})"), HasSubstr("TF_CONFIG: cluster:"));
  EXPECT_THAT(message(R"({"cluster":{"worker":["a:1"]}})"), HasSubstr("TF_CONFIG: task:"));
  EXPECT_THAT(message(R"({"cluster":{"worker":{"0":"a:1"}},"task":{"type":"worker","index":0}})"),
              HasSubstr("TF_CONFIG: cluster.worker: must be a list"));
  EXPECT_THAT(message(R"({"cluster":{"worker":[1]},"task":{"type":"worker","index":0}})"),
              HasSubstr("TF_CONFIG: cluster.worker[0]: must be a \"host:port\" string"));
  EXPECT_THAT(message(R"({"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":1}})"),
              HasSubstr("TF_CONFIG: task.index: 1 is out of range: cluster.worker has 1 entries"));
  EXPECT_THAT(message(R"({"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":-1}})"),
              HasSubstr("TF_CONFIG: task.index: must be a non-negative integer, got -1"));
  EXPECT_THAT(message(R"({"cluster":{"worker":["a:1"]},"task":{"type":"ps","index":0}})"),
              HasSubstr("TF_CONFIG: task.type: \"ps\" is not in the cluster (has: worker)"));
  EXPECT_THAT(message(R"({"cluster":{"worker":["a:1"]},"task":{"index":0}})"),
              HasSubstr("TF_CONFIG: task.type: must be a non-empty string"));
  // Type errors come from the decoder's field toolkit (api/json_fields.h).
  EXPECT_THAT(message(R"({"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":"0"}})"),
              HasSubstr("TF_CONFIG: task.index: must be an integer, got \"0\""));
  EXPECT_THAT(message(R"({"cluster":{"worker":["a:1"]},"task":{"type":3,"index":0}})"),
              HasSubstr("TF_CONFIG: task.type: must be a string, got 3"));
}

TEST(ReplicaEnvironmentTest, PsJobWorker) {
  const TrainingJob job = Load(kPsJob);
  const ClusterSpec cluster = InClusterSpec(job);
  EXPECT_THAT(
      ReplicaEnvironment(job, cluster, ReplicaType::kWorker, 1, "0123abcd"),
      ElementsAre(Pair("TF_CONFIG", TfConfigJson(cluster, ReplicaType::kWorker, 1)),
                  Pair("KUBETRAIN_PS_HOSTS", "fmnist-ps-0.default.svc:2222"),
                  Pair("KUBETRAIN_WORKER_HOSTS",
                       "fmnist-worker-0.default.svc:2222,fmnist-worker-1.default.svc:2222"),
                  Pair("KUBETRAIN_JOB_NAME", "fmnist"), Pair("KUBETRAIN_NAMESPACE", "default"),
                  Pair("KUBETRAIN_REPLICA_TYPE", "worker"), Pair("KUBETRAIN_REPLICA_INDEX", "1"),
                  Pair("KUBETRAIN_JOB_TOKEN", "0123abcd")));
}

TEST(ReplicaEnvironmentTest, ElasticWorkersGetTheirBounds) {
  TrainingJob job = Load(kChiefJob);
  job.spec.elastic_policy = ElasticPolicy{1, 5};
  const ClusterSpec cluster = InClusterSpec(job);
  const EnvList worker = ReplicaEnvironment(job, cluster, ReplicaType::kWorker, 1, "t");
  EXPECT_THAT(worker, ::testing::Contains(Pair("KUBETRAIN_MIN_WORKERS", "1")));
  EXPECT_THAT(worker, ::testing::Contains(Pair("KUBETRAIN_MAX_WORKERS", "5")));
  // TF_CONFIG lists the workers of the current spec, as for a fixed job.
  EXPECT_EQ(worker[0].second, TfConfigJson(cluster, ReplicaType::kWorker, 1));
  // Only Worker replicas are elastic.
  for (const auto& [k, v] : ReplicaEnvironment(job, cluster, ReplicaType::kChief, 0, "t")) {
    EXPECT_NE(k, "KUBETRAIN_MIN_WORKERS");
    EXPECT_NE(k, "KUBETRAIN_MAX_WORKERS");
  }
  // A fixed job gets neither.
  job.spec.elastic_policy.reset();
  for (const auto& [k, v] : ReplicaEnvironment(job, cluster, ReplicaType::kWorker, 1, "t")) {
    EXPECT_NE(k, "KUBETRAIN_MIN_WORKERS");
  }
}

TEST(ReplicaEnvironmentTest, PsReplicaWithoutToken) {
  const TrainingJob job = Load(kPsJob);
  const ClusterSpec cluster = InClusterSpec(job);
  EnvList env = ReplicaEnvironment(job, cluster, ReplicaType::kPS, 0, "");
  ASSERT_EQ(env.size(), 7u);
  EXPECT_EQ(env[5], (std::pair<std::string, std::string>("KUBETRAIN_REPLICA_TYPE", "ps")));
  for (const auto& [k, v] : env) {
    EXPECT_NE(k, "KUBETRAIN_JOB_TOKEN");
    EXPECT_NE(k, "MASTER_ADDR");
  }
}

TEST(ReplicaEnvironmentTest, WorkerOnlyJobWithChiefGetsPyTorchVariables) {
  const TrainingJob job = Load(kChiefJob);
  const ClusterSpec cluster = InClusterSpec(job);
  EXPECT_THAT(
      ReplicaEnvironment(job, cluster, ReplicaType::kWorker, 1, "t"),
      ElementsAre(
          Pair("TF_CONFIG", TfConfigJson(cluster, ReplicaType::kWorker, 1)),
          Pair("KUBETRAIN_WORKER_HOSTS", "dist-worker-0.ns3.svc:2222,dist-worker-1.ns3.svc:2222"),
          Pair("KUBETRAIN_CHIEF_HOSTS", "dist-chief-0.ns3.svc:2222"),
          Pair("KUBETRAIN_JOB_NAME", "dist"), Pair("KUBETRAIN_NAMESPACE", "ns3"),
          Pair("KUBETRAIN_REPLICA_TYPE", "worker"), Pair("KUBETRAIN_REPLICA_INDEX", "1"),
          Pair("MASTER_ADDR", "dist-chief-0.ns3.svc"), Pair("MASTER_PORT", "2222"),
          Pair("WORLD_SIZE", "3"), Pair("RANK", "2"), Pair("KUBETRAIN_JOB_TOKEN", "t")));
  EnvList chief = ReplicaEnvironment(job, cluster, ReplicaType::kChief, 0, "");
  EXPECT_EQ(chief.back(), (std::pair<std::string, std::string>("RANK", "0")));
  EnvList eval = ReplicaEnvironment(job, cluster, ReplicaType::kEvaluator, 0, "");
  EXPECT_EQ(eval.back(), (std::pair<std::string, std::string>("WORLD_SIZE", "3")));
}

TEST(ReplicaEnvironmentTest, WorkerOnlyJobWithoutChiefUsesWorkerZero) {
  const TrainingJob job = Load(R"(
apiVersion: kubetrain.io/v1alpha1
kind: TrainingJob
metadata: {name: ring}
spec:
  replicaSpecs:
    Worker:
      replicas: 3
      template: {spec: {containers: [{name: kubetrain, image: img, ports: [{name: kubetrain-port, containerPort: 4000}]}]}}
)");
  const ClusterSpec cluster = InClusterSpec(job);
  EnvList env = ReplicaEnvironment(job, cluster, ReplicaType::kWorker, 2, "");
  EXPECT_THAT(env, ::testing::Contains(Pair("MASTER_ADDR", "ring-worker-0.default.svc")));
  EXPECT_THAT(env, ::testing::Contains(Pair("MASTER_PORT", "4000")));
  EXPECT_THAT(env, ::testing::Contains(Pair("WORLD_SIZE", "3")));
  EXPECT_THAT(env, ::testing::Contains(Pair("RANK", "2")));
  EXPECT_THAT(env, ::testing::Contains(Pair("KUBETRAIN_WORKER_HOSTS",
                                            "ring-worker-0.default.svc:4000,ring-worker-1.default."
                                            "svc:4000,ring-worker-2.default.svc:4000")));
}

TEST(ExpandVarsTest, KubeletSemantics) {
  const EnvList env = {{"A", "alpha"}, {"B", "$(A)"}, {"EMPTY", ""}, {"A2", "x"}, {"A2", "y"}};
  EXPECT_EQ(ExpandVars("$(A)", env), "alpha");
  EXPECT_EQ(ExpandVars("--ps_hosts=$(A),$(A)", env), "--ps_hosts=alpha,alpha");
  EXPECT_EQ(ExpandVars("$$(A)", env), "$(A)");             // escaped
  EXPECT_EQ(ExpandVars("$$$(A)", env), "$alpha");          // escaped $, then reference
  EXPECT_EQ(ExpandVars("$(MISSING)", env), "$(MISSING)");  // unknown: kept
  EXPECT_EQ(ExpandVars("$(EMPTY)x", env), "x");
  EXPECT_EQ(ExpandVars("$(A", env), "$(A");  // unterminated: kept
  EXPECT_EQ(ExpandVars("$A $", env), "$A $");
  EXPECT_EQ(ExpandVars("a$$b", env), "a$b");
  EXPECT_EQ(ExpandVars("$(B)", env), "$(A)");  // values are not expanded again
  EXPECT_EQ(ExpandVars("$(A2)", env), "y");    // last definition wins
  EXPECT_EQ(ExpandVars("$()", env), "$()");
  EXPECT_EQ(ExpandVars("", env), "");
  EXPECT_EQ(ExpandVars("plain", env), "plain");
}

}  // namespace
}  // namespace kubetrain::api
