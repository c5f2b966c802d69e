#include "api/training_job.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "base/yaml_json.h"

namespace kubetrain::api {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr char kFullJob[] = R"yaml(
apiVersion: kubetrain.io/v1alpha1
kind: TrainingJob
metadata:
  name: fmnist
  namespace: ml
  labels: {team: vision}
  annotations: {note: "hello"}
  uid: 1234-abcd
spec:
  replicaSpecs:
    PS:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: kubetrain
              image: kubetrain:latest
              args: ["train", "--model", "mlp", "--epochs", "10"]
              ports: [{name: kubetrain-port, containerPort: 2222}]
    Worker:
      replicas: 2
      restartPolicy: ExitCode
      template:
        metadata: {labels: {app: fmnist}}
        spec:
          containers:
            - name: kubetrain
              image: kubetrain:latest
              command: ["/bin/sh", "-c"]
              args: ["echo $(KUBETRAIN_REPLICA_INDEX)"]
              env:
                - {name: EPOCHS, value: "10"}
                - name: SECRET
                  valueFrom: {secretKeyRef: {name: s, key: k}}
              resources: {limits: {cpu: "2"}}
  runPolicy:
    cleanPodPolicy: All
    backoffLimit: 3
    stallTimeoutSeconds: 120
    stallPolicy: Restart
    schedulingTimeoutSeconds: 600
    unschedulablePolicy: Fail
    nodeLostTimeoutSeconds: 90
    activeDeadlineSeconds: 3600
    ttlSecondsAfterFinished: 600
    suspend: false
    schedulingPolicy: {minAvailable: 3, queue: q, priorityClass: p}
  successPolicy: AllWorkers
  serviceMode: PerJob
)yaml";

TEST(TrainingJobTest, ParsesEveryField) {
  absl::StatusOr<TrainingJob> job = ParseTrainingJob(kFullJob, "job.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->api_version, "kubetrain.io/v1alpha1");
  EXPECT_EQ(job->kind, "TrainingJob");
  EXPECT_EQ(job->metadata.name, "fmnist");
  EXPECT_EQ(job->metadata.namespace_name, "ml");
  EXPECT_EQ(job->metadata.labels.at("team"), "vision");
  EXPECT_EQ(job->metadata.annotations.at("note"), "hello");
  EXPECT_EQ(job->metadata.uid, "1234-abcd");
  ASSERT_EQ(job->spec.replica_specs.size(), 2u);
  const ReplicaSpec* ps = job->Find(ReplicaType::kPS);
  ASSERT_NE(ps, nullptr);
  EXPECT_EQ(ps->replicas, 1);
  EXPECT_EQ(ps->restart_policy, RestartPolicy::kOnFailure);
  const ReplicaSpec* worker = job->Find(ReplicaType::kWorker);
  ASSERT_NE(worker, nullptr);
  EXPECT_EQ(worker->replicas, 2);
  EXPECT_EQ(worker->restart_policy, RestartPolicy::kExitCode);
  EXPECT_EQ(job->Find(ReplicaType::kChief), nullptr);
  EXPECT_EQ(job->ReplicaCount(ReplicaType::kWorker), 2);
  EXPECT_EQ(job->ReplicaCount(ReplicaType::kChief), 0);

  // The template is kept whole, including fields kubetrain does not model.
  EXPECT_EQ(worker->pod_template["spec"]["containers"][0]["resources"]["limits"]["cpu"], "2");
  EXPECT_EQ(worker->pod_template["metadata"]["labels"]["app"], "fmnist");

  absl::StatusOr<Container> c = worker->FirstContainer();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "kubetrain");
  EXPECT_EQ(c->image, "kubetrain:latest");
  EXPECT_EQ(c->command, (std::vector<std::string>{"/bin/sh", "-c"}));
  EXPECT_EQ(c->args, (std::vector<std::string>{"echo $(KUBETRAIN_REPLICA_INDEX)"}));
  ASSERT_EQ(c->env.size(), 2u);
  EXPECT_EQ(c->env[0], (EnvVar{"EPOCHS", "10", false}));
  EXPECT_EQ(c->env[1].name, "SECRET");
  EXPECT_TRUE(c->env[1].value_from);
  absl::StatusOr<Container> psc = ps->FirstContainer();
  ASSERT_TRUE(psc.ok());
  ASSERT_EQ(psc->ports.size(), 1u);
  EXPECT_EQ(psc->ports[0].name, "kubetrain-port");
  EXPECT_EQ(psc->ports[0].container_port, 2222);

  const RunPolicy& rp = job->spec.run_policy;
  EXPECT_EQ(rp.clean_pod_policy, CleanPodPolicy::kAll);
  EXPECT_EQ(rp.backoff_limit, 3);
  EXPECT_EQ(rp.active_deadline_seconds, 3600);
  EXPECT_EQ(rp.stall_timeout_seconds, 120);
  EXPECT_EQ(rp.stall_policy, StallPolicy::kRestart);
  EXPECT_EQ(rp.scheduling_timeout_seconds, 600);
  EXPECT_EQ(rp.unschedulable_policy, UnschedulablePolicy::kFail);
  EXPECT_EQ(rp.node_lost_timeout_seconds, 90);
  EXPECT_EQ(rp.ttl_seconds_after_finished, 600);
  EXPECT_FALSE(rp.suspend);
  ASSERT_TRUE(rp.scheduling_policy.has_value());
  EXPECT_EQ(rp.scheduling_policy->min_available, 3);
  EXPECT_EQ(rp.scheduling_policy->queue, "q");
  EXPECT_EQ(rp.scheduling_policy->priority_class, "p");
  EXPECT_EQ(job->spec.success_policy, SuccessPolicy::kAllWorkers);
  EXPECT_EQ(job->spec.service_mode, ServiceMode::kPerJob);
  EXPECT_TRUE(Validate(*job).ok()) << Validate(*job);
}

TEST(TrainingJobTest, JsonRoundTrip) {
  absl::StatusOr<TrainingJob> job = ParseTrainingJob(kFullJob, "job.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  JobStatus status;
  status.conditions.push_back(Condition{kCondCreated, ConditionStatus::kTrue, "TrainingJobCreated",
                                        "", "2026-11-22T00:00:00Z", "2026-11-22T00:00:00Z"});
  job->status = status;
  const json j = ToJson(*job);
  EXPECT_EQ(j["spec"]["replicaSpecs"]["Worker"]["restartPolicy"], "ExitCode");
  EXPECT_EQ(j["spec"]["successPolicy"], "AllWorkers");
  EXPECT_EQ(j["spec"]["serviceMode"], "PerJob");
  absl::StatusOr<TrainingJob> back = FromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *job);

  // Through JSON text as well, which ParseTrainingJob accepts too.
  absl::StatusOr<TrainingJob> from_text = ParseTrainingJob(j.dump(2), "job.json");
  ASSERT_TRUE(from_text.ok()) << from_text.status();
  EXPECT_EQ(*from_text, *job);

  // Defaulted jobs round-trip too.
  ApplyDefaults(*job);
  absl::StatusOr<TrainingJob> defaulted = FromJson(ToJson(*job));
  ASSERT_TRUE(defaulted.ok());
  EXPECT_EQ(*defaulted, *job);
}

constexpr char kMinimalJob[] = R"(
apiVersion: kubetrain.io/v1alpha1
kind: TrainingJob
metadata: {name: mini}
spec:
  replicaSpecs:
    worker:
      template:
        spec:
          containers: [{name: kubetrain, image: kubetrain:latest}]
)";

TEST(TrainingJobTest, Defaults) {
  absl::StatusOr<TrainingJob> job = ParseTrainingJob(kMinimalJob, "mini.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  // Replica-type keys are matched case-insensitively, as TFJob does.
  const ReplicaSpec* w = job->Find(ReplicaType::kWorker);
  ASSERT_NE(w, nullptr);
  EXPECT_FALSE(w->replicas.has_value());
  EXPECT_EQ(w->Replicas(), 1);
  EXPECT_EQ(w->Restart(), RestartPolicy::kNever);

  ApplyDefaults(*job);
  EXPECT_EQ(job->metadata.namespace_name, "default");
  w = job->Find(ReplicaType::kWorker);
  EXPECT_EQ(w->replicas, 1);
  EXPECT_EQ(w->restart_policy, RestartPolicy::kNever);  // TFJobDefaultRestartPolicy
  EXPECT_EQ(job->spec.run_policy.clean_pod_policy, CleanPodPolicy::kRunning);
  EXPECT_FALSE(job->spec.run_policy.backoff_limit.has_value());
  EXPECT_FALSE(job->spec.run_policy.active_deadline_seconds.has_value());
  EXPECT_EQ(job->spec.success_policy, SuccessPolicy::kDefault);
  // The port is added to the first container, as TFJob adds tfjob-port.
  EXPECT_EQ(w->pod_template["spec"]["containers"][0]["ports"],
            json::parse(R"([{"name":"kubetrain-port","containerPort":2222}])"));
  EXPECT_EQ(w->Port(), 2222);
  EXPECT_TRUE(Validate(*job).ok()) << Validate(*job);

  TrainingJob again = *job;
  ApplyDefaults(again);
  EXPECT_EQ(again, *job);  // idempotent
}

TEST(TrainingJobTest, DefaultsKeepExplicitValuesAndCustomPort) {
  absl::StatusOr<TrainingJob> job = LoadTrainingJob(R"(
apiVersion: kubetrain.io/v1alpha1
kind: TrainingJob
metadata: {name: p, namespace: research}
spec:
  replicaSpecs:
    Worker:
      replicas: 0
      restartPolicy: Always
      template: {spec: {containers: [{name: c, image: i, ports: [{name: kubetrain-port, containerPort: 3333}]}]}}
    Chief:
      template: {spec: {containers: [{name: c, image: i}]}}
  runPolicy: {cleanPodPolicy: None}
)",
                                                    "p.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->metadata.namespace_name, "research");
  EXPECT_EQ(job->Find(ReplicaType::kWorker)->replicas, 0);
  EXPECT_EQ(job->Find(ReplicaType::kWorker)->restart_policy, RestartPolicy::kAlways);
  EXPECT_EQ(job->Find(ReplicaType::kWorker)->Port(), 3333);
  EXPECT_EQ(job->Find(ReplicaType::kWorker)->pod_template["spec"]["containers"][0]["ports"].size(),
            1u);
  EXPECT_EQ(job->spec.run_policy.clean_pod_policy, CleanPodPolicy::kNone);
}

struct InvalidCase {
  const char* name;
  std::string spec_yaml;  // replaces the spec: block
  std::string expected;
  std::string metadata = "{name: fmnist}";
  std::string header = "apiVersion: kubetrain.io/v1alpha1\nkind: TrainingJob\n";
};

constexpr char kContainer[] = "{spec: {containers: [{name: kubetrain, image: kubetrain:latest}]}}";

std::string Replica(const std::string& type, const std::string& extra) {
  return "    " + type + ": {" + extra + (extra.empty() ? "" : ", ") + "template: " + kContainer +
         "}\n";
}

std::string Spec(const std::string& replicas, const std::string& rest = "") {
  return "spec:\n  replicaSpecs:\n" + replicas + rest;
}

class InvalidSpecTest : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(InvalidSpecTest, RefusedWithFieldPath) {
  const InvalidCase& c = GetParam();
  const std::string text = c.header + "metadata: " + c.metadata + "\n" + c.spec_yaml;
  absl::StatusOr<TrainingJob> job = LoadTrainingJob(text, "job.yaml");
  ASSERT_FALSE(job.ok()) << "accepted:\n" << text;
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(job.status().message()), HasSubstr(c.expected)) << text;
  EXPECT_THAT(std::string(job.status().message()), ::testing::StartsWith("job.yaml"));
}

const std::string kWorker = Replica("Worker", "replicas: 2");

INSTANTIATE_TEST_SUITE_P(
    Cases, InvalidSpecTest,
    ::testing::Values(
        InvalidCase{"NegativeReplicas", Spec(Replica("Worker", "replicas: -1")),
                    "spec.replicaSpecs.Worker.replicas: must be >= 0, got -1"},
        InvalidCase{"ReplicasNotInteger", Spec(Replica("Worker", "replicas: two")),
                    "spec.replicaSpecs.Worker.replicas: must be an integer, got \"two\""},
        InvalidCase{"UnknownReplicaType", Spec(kWorker + Replica("Master", "")),
                    "spec.replicaSpecs.Master: unknown replica type (known: PS, Worker, Chief, "
                    "Evaluator)"},
        InvalidCase{"DuplicateReplicaType", Spec(kWorker + Replica("worker", "")),
                    "spec.replicaSpecs.worker: duplicates replica type Worker"},
        InvalidCase{"NoWorkerOrChief", Spec(Replica("Evaluator", "")),
                    "spec.replicaSpecs: must contain a Worker or Chief"},
        InvalidCase{"ZeroWorkers", Spec(Replica("Worker", "replicas: 0")),
                    "spec.replicaSpecs: must contain a Worker or Chief"},
        InvalidCase{"EmptyReplicaSpecs", "spec: {replicaSpecs: {}}\n",
                    "spec.replicaSpecs: must contain a Worker or Chief"},
        InvalidCase{"PsWithoutWorkers", Spec(Replica("PS", "")),
                    "spec.replicaSpecs.PS: parameter servers need a Worker or Chief"},
        InvalidCase{"TwoChiefs", Spec(kWorker + Replica("Chief", "replicas: 2")),
                    "spec.replicaSpecs.Chief.replicas: must be 0 or 1 (at most one chief), got 2"},
        InvalidCase{"BadRestartPolicy", Spec(Replica("Worker", "restartPolicy: Sometimes")),
                    "spec.replicaSpecs.Worker.restartPolicy: must be one of Always, OnFailure, "
                    "Never, ExitCode, got \"Sometimes\""},
        InvalidCase{"NoContainers", Spec("    Worker: {template: {spec: {containers: []}}}\n"),
                    "spec.replicaSpecs.Worker.template.spec.containers: must have at least one "
                    "container"},
        InvalidCase{"NoTemplate", Spec("    Worker: {replicas: 1}\n"),
                    "spec.replicaSpecs.Worker.template.spec.containers: must have at least one "
                    "container"},
        InvalidCase{"NoImage", Spec("    Worker: {template: {spec: {containers: [{name: c}]}}}\n"),
                    "spec.replicaSpecs.Worker.template.spec.containers[0].image: must not be "
                    "empty"},
        InvalidCase{"ArgNotString",
                    Spec("    Worker: {template: {spec: {containers: [{name: c, image: i, args: "
                         "[--epochs, 10]}]}}}\n"),
                    "spec.replicaSpecs.Worker.template.spec.containers[0].args[1]: must be a "
                    "string, got 10"},
        InvalidCase{"BadPort",
                    Spec("    Worker: {template: {spec: {containers: [{name: c, image: i, ports: "
                         "[{name: kubetrain-port, containerPort: 70000}]}]}}}\n"),
                    "spec.replicaSpecs.Worker.template.spec.containers[0].ports[0].containerPort: "
                    "must be in 1..65535, got 70000"},
        InvalidCase{"NegativeBackoffLimit", Spec(kWorker, "  runPolicy: {backoffLimit: -1}\n"),
                    "spec.runPolicy.backoffLimit: must be >= 0, got -1"},
        InvalidCase{"NegativeDeadline", Spec(kWorker, "  runPolicy: {activeDeadlineSeconds: -5}\n"),
                    "spec.runPolicy.activeDeadlineSeconds: must be >= 1, got -5"},
        InvalidCase{"ZeroDeadline", Spec(kWorker, "  runPolicy: {activeDeadlineSeconds: 0}\n"),
                    "spec.runPolicy.activeDeadlineSeconds: must be >= 1, got 0"},
        InvalidCase{"NegativeStallTimeout",
                    Spec(kWorker, "  runPolicy: {stallTimeoutSeconds: -1}\n"),
                    "spec.runPolicy.stallTimeoutSeconds: must be >= 0 (0: off), got -1"},
        InvalidCase{"BadStallPolicy", Spec(kWorker, "  runPolicy: {stallPolicy: Kill}\n"),
                    "spec.runPolicy.stallPolicy: must be one of None, Restart, Fail, got "
                    "\"Kill\""},
        InvalidCase{"ZeroSchedulingTimeout",
                    Spec(kWorker, "  runPolicy: {schedulingTimeoutSeconds: 0}\n"),
                    "spec.runPolicy.schedulingTimeoutSeconds: must be >= 1 (absent: never), got 0"},
        InvalidCase{"BadUnschedulablePolicy",
                    Spec(kWorker, "  runPolicy: {unschedulablePolicy: Retry}\n"),
                    "spec.runPolicy.unschedulablePolicy: must be one of Wait, Fail, got "
                    "\"Retry\""},
        InvalidCase{"NegativeNodeLostTimeout",
                    Spec(kWorker, "  runPolicy: {nodeLostTimeoutSeconds: -5}\n"),
                    "spec.runPolicy.nodeLostTimeoutSeconds: must be >= 0 (0: never), got -5"},
        InvalidCase{"NegativeTtl", Spec(kWorker, "  runPolicy: {ttlSecondsAfterFinished: -1}\n"),
                    "spec.runPolicy.ttlSecondsAfterFinished: must be >= 0, got -1"},
        InvalidCase{"BadCleanPodPolicy", Spec(kWorker, "  runPolicy: {cleanPodPolicy: Some}\n"),
                    "spec.runPolicy.cleanPodPolicy: must be one of Running, All, None, got "
                    "\"Some\""},
        InvalidCase{"SuspendNotBool", Spec(kWorker, "  runPolicy: {suspend: maybe}\n"),
                    "spec.runPolicy.suspend: must be true or false, got \"maybe\""},
        InvalidCase{"BadSuccessPolicy", Spec(kWorker, "  successPolicy: Chief\n"),
                    "spec.successPolicy: must be one of \"\", AllWorkers, got \"Chief\""},
        InvalidCase{"BadServiceMode", Spec(kWorker, "  serviceMode: PerPod\n"),
                    "spec.serviceMode: must be one of PerReplica, PerJob, got \"PerPod\""},
        InvalidCase{"UnknownSpecField", Spec(kWorker, "  replicaSpec: {}\n"),
                    "spec.replicaSpec: unknown field (known: replicaSpecs, runPolicy, "
                    "successPolicy, serviceMode, elasticPolicy)"},
        InvalidCase{
            "ElasticWithoutWorker",
            Spec(Replica("Chief", ""), "  elasticPolicy: {minReplicas: 1, maxReplicas: 2}\n"),
            "spec.elasticPolicy: needs a Worker replica spec"},
        InvalidCase{"ElasticMinZero",
                    Spec(kWorker, "  elasticPolicy: {minReplicas: 0, maxReplicas: 2}\n"),
                    "spec.elasticPolicy.minReplicas: must be >= 1, got 0"},
        InvalidCase{"ElasticMaxBelowMin",
                    Spec(kWorker, "  elasticPolicy: {minReplicas: 3, maxReplicas: 2}\n"),
                    "spec.elasticPolicy.maxReplicas: must be >= minReplicas (3), got 2"},
        InvalidCase{"ElasticReplicasAboveMax",
                    Spec(Replica("Worker", "replicas: 5"),
                         "  elasticPolicy: {minReplicas: 1, maxReplicas: 4}\n"),
                    "spec.replicaSpecs.Worker.replicas: must be within spec.elasticPolicy [1, 4], "
                    "got 5"},
        InvalidCase{"ElasticReplicasBelowMin",
                    Spec(kWorker, "  elasticPolicy: {minReplicas: 3, maxReplicas: 4}\n"),
                    "spec.replicaSpecs.Worker.replicas: must be within spec.elasticPolicy [3, 4], "
                    "got 2"},
        InvalidCase{"ElasticMissingMax", Spec(kWorker, "  elasticPolicy: {minReplicas: 1}\n"),
                    "spec.elasticPolicy.maxReplicas: is required"},
        InvalidCase{"ElasticUnknownField",
                    Spec(kWorker, "  elasticPolicy: {minReplicas: 1, maxReplicas: 2, max: 3}\n"),
                    "spec.elasticPolicy.max: unknown field"},
        InvalidCase{"ElasticNameTooLongAtMax",
                    Spec(kWorker, "  elasticPolicy: {minReplicas: 1, maxReplicas: 11}\n"),
                    "replica name \"" + std::string(54, 'a') + "-worker-10\" has 64 characters",
                    "{name: " + std::string(54, 'a') + "}"},
        InvalidCase{"UnknownReplicaField", Spec(Replica("Worker", "replica: 2")),
                    "spec.replicaSpecs.Worker.replica: unknown field"},
        InvalidCase{"UppercaseName", Spec(kWorker), "metadata.name: \"FMnist\" is not a DNS-1035",
                    "{name: FMnist}"},
        InvalidCase{"NameStartsWithDigit", Spec(kWorker),
                    "metadata.name: \"1job\" is not a DNS-1035", "{name: 1job}"},
        InvalidCase{"MissingName", Spec(kWorker), "metadata.name: must not be empty", "{}"},
        InvalidCase{"NameTooLongForSuffix", Spec(kWorker),
                    "metadata.name: \"" + std::string(55, 'a') + "\" is too long: replica name \"" +
                        std::string(55, 'a') + "-worker-1\" has 64 characters, the limit is 63",
                    "{name: " + std::string(55, 'a') + "}"},
        InvalidCase{"BadNamespace", Spec(kWorker), "metadata.namespace: \"Team_A\" is not a",
                    "{name: ok, namespace: Team_A}"},
        InvalidCase{"WrongApiVersion", Spec(kWorker),
                    "apiVersion: must be \"kubetrain.io/v1alpha1\", got \"kubeflow.org/v1\"",
                    "{name: fmnist}", "apiVersion: kubeflow.org/v1\nkind: TrainingJob\n"},
        InvalidCase{"WrongKind", Spec(kWorker), "kind: must be \"TrainingJob\", got \"TFJob\"",
                    "{name: fmnist}", "apiVersion: kubetrain.io/v1alpha1\nkind: TFJob\n"},
        InvalidCase{"DuplicateYamlKey", "spec:\n  replicaSpecs:\n" + kWorker + kWorker,
                    "job.yaml:7:5: duplicate key \"Worker\""}),
    [](const ::testing::TestParamInfo<InvalidCase>& info) { return info.param.name; });

constexpr char kElasticJob[] = R"yaml(
apiVersion: kubetrain.io/v1alpha1
kind: TrainingJob
metadata: {name: elastic}
spec:
  elasticPolicy: {minReplicas: 2, maxReplicas: 6}
  replicaSpecs:
    Worker:
      replicas: 4
      template: {spec: {containers: [{name: kubetrain, image: kubetrain:latest}]}}
)yaml";

TEST(ElasticPolicyTest, ParsesRoundTripsAndValidates) {
  absl::StatusOr<TrainingJob> job = LoadTrainingJob(kElasticJob, "elastic.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(job->spec.elastic_policy.has_value());
  EXPECT_TRUE(job->Elastic());
  EXPECT_EQ(job->spec.elastic_policy->min_replicas, 2);
  EXPECT_EQ(job->spec.elastic_policy->max_replicas, 6);
  const json out = ToJson(*job);
  EXPECT_EQ(out["spec"]["elasticPolicy"], json::parse(R"({"minReplicas":2,"maxReplicas":6})"));
  absl::StatusOr<TrainingJob> back = FromJson(out);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *job);
}

TEST(ElasticPolicyTest, AbsentMeansNotElasticAndDefaultsAddNone) {
  absl::StatusOr<TrainingJob> job = LoadTrainingJob(R"yaml(
apiVersion: kubetrain.io/v1alpha1
kind: TrainingJob
metadata: {name: fixed}
spec:
  replicaSpecs:
    Worker: {replicas: 3, template: {spec: {containers: [{name: c, image: i}]}}}
)yaml",
                                                    "fixed.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE(job->Elastic());
  EXPECT_FALSE(ToJson(*job)["spec"].contains("elasticPolicy"));
  // Nothing to clamp without a policy.
  EXPECT_EQ(ClampElasticWorkers(*job), std::nullopt);
  EXPECT_EQ(job->ReplicaCount(ReplicaType::kWorker), 3);
}

TEST(ElasticPolicyTest, ClampsAScaledJobToItsBounds) {
  absl::StatusOr<TrainingJob> job = LoadTrainingJob(kElasticJob, "elastic.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(ClampElasticWorkers(*job), std::nullopt);          // 4 lies within [2, 6]
  job->spec.replica_specs[ReplicaType::kWorker].replicas = 9;  // kubectl scale --replicas=9
  EXPECT_EQ(ClampElasticWorkers(*job), (ElasticClamp{9, 6}));
  EXPECT_EQ(ElasticBoundMessage(ElasticClamp{9, 6}), "9 is above spec.elasticPolicy.maxReplicas 6");
  EXPECT_EQ(ElasticBoundMessage(ElasticClamp{1, 2}), "1 is below spec.elasticPolicy.minReplicas 2");
  EXPECT_EQ(job->ReplicaCount(ReplicaType::kWorker), 6);
  EXPECT_TRUE(Validate(*job).ok());
  job->spec.replica_specs[ReplicaType::kWorker].replicas = 1;
  EXPECT_EQ(ClampElasticWorkers(*job), (ElasticClamp{1, 2}));
  EXPECT_EQ(job->ReplicaCount(ReplicaType::kWorker), 2);
  // kubectl scale --replicas=0 would leave no trainer (an invalid spec that
  // fails the job); clamped, the job keeps minReplicas workers and stays valid.
  job->spec.replica_specs[ReplicaType::kWorker].replicas = 0;
  EXPECT_EQ(ClampElasticWorkers(*job), (ElasticClamp{0, 2}));
  EXPECT_TRUE(Validate(*job).ok()) << Validate(*job);
}

TEST(TrainingJobTest, MalformedYamlGivesLineAndColumn) {
  absl::StatusOr<TrainingJob> job = ParseTrainingJob(
      "apiVersion: kubetrain.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: x\nspec: 1\n",
      "bad.yaml");
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(std::string(job.status().message()),
              ::testing::MatchesRegex("bad\\.yaml:[0-9]+:[0-9]+: malformed "
                                      "YAML: .*"));

  job = ParseTrainingJob("a: b\n  c: d\n", "indent.yaml");
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(std::string(job.status().message()), HasSubstr("indent.yaml:2:"));
}

TEST(TrainingJobTest, MalformedJsonGivesLineAndColumn) {
  absl::StatusOr<TrainingJob> job = ParseTrainingJob(
      "{\n  \"apiVersion\": \"kubetrain.io/v1alpha1\",\n  \"kind\": }\n", "bad.json");
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(std::string(job.status().message()), HasSubstr("bad.json:3:"));
  EXPECT_THAT(std::string(job.status().message()), HasSubstr("malformed JSON"));
}

TEST(TrainingJobTest, RefusesEmptyAndMultiDocumentText) {
  EXPECT_THAT(std::string(ParseTrainingJob("", "e.yaml").status().message()),
              HasSubstr("e.yaml: empty document"));
  EXPECT_THAT(std::string(ParseTrainingJob("a: 1\n---\nb: 2\n", "m.yaml").status().message()),
              HasSubstr("expected one YAML document, found 2"));
  EXPECT_THAT(std::string(ParseTrainingJob("[1, 2]", "l.json").status().message()),
              HasSubstr("must be a mapping"));
}

TEST(YamlJsonTest, ResolvesPlainScalarsWithTheCoreSchema) {
  absl::StatusOr<json> j = base::ParseYamlOrJson(R"(
int: 42
neg: -7
hex: 0x1F
oct: 0o17
float: 2.5
exp: 1e3
yes_t: true
no_f: False
nul: ~
empty:
quoted_int: "42"
single: 'true'
word: yes
version: 1.2.3
tagged: !!str 5
block: |
  line
)",
                                                 "s.yaml");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["int"], 42);
  EXPECT_TRUE((*j)["int"].is_number_integer());
  EXPECT_EQ((*j)["neg"], -7);
  EXPECT_EQ((*j)["hex"], 31);
  EXPECT_EQ((*j)["oct"], 15);
  EXPECT_EQ((*j)["float"], 2.5);
  EXPECT_EQ((*j)["exp"], 1000.0);
  EXPECT_EQ((*j)["yes_t"], true);
  EXPECT_EQ((*j)["no_f"], false);
  EXPECT_TRUE((*j)["nul"].is_null());
  EXPECT_TRUE((*j)["empty"].is_null());
  EXPECT_EQ((*j)["quoted_int"], "42");
  EXPECT_EQ((*j)["single"], "true");
  EXPECT_EQ((*j)["word"], "yes");
  EXPECT_EQ((*j)["version"], "1.2.3");
  EXPECT_EQ((*j)["tagged"], "5");
  EXPECT_EQ((*j)["block"], "line\n");
}

TEST(EnumNamesTest, RoundTrip) {
  for (ReplicaType t : kAllReplicaTypes) {
    EXPECT_EQ(ParseReplicaType(ReplicaTypeName(t)), t);
    EXPECT_EQ(ParseReplicaType(ReplicaTypeLower(t)), t);
  }
  EXPECT_EQ(ReplicaTypeLower(ReplicaType::kPS), "ps");
  EXPECT_EQ(ParseReplicaType("Master"), std::nullopt);
  for (RestartPolicy p : {RestartPolicy::kAlways, RestartPolicy::kOnFailure, RestartPolicy::kNever,
                          RestartPolicy::kExitCode}) {
    EXPECT_EQ(ParseRestartPolicy(RestartPolicyName(p)), p);
  }
  EXPECT_EQ(ParseRestartPolicy("onfailure"), std::nullopt);  // enums are case-sensitive
  EXPECT_EQ(ParseSuccessPolicy(""), SuccessPolicy::kDefault);
  EXPECT_EQ(ParseSuccessPolicy("AllWorkers"), SuccessPolicy::kAllWorkers);
  EXPECT_EQ(ParseCleanPodPolicy("Running"), CleanPodPolicy::kRunning);
  for (ServiceMode m : {ServiceMode::kPerReplica, ServiceMode::kPerJob}) {
    EXPECT_EQ(ParseServiceMode(ServiceModeName(m)), m);
  }
  EXPECT_EQ(ParseServiceMode(""), std::nullopt);  // absent is PerReplica; "" is not a mode
  for (StallPolicy p : {StallPolicy::kNone, StallPolicy::kRestart, StallPolicy::kFail}) {
    EXPECT_EQ(ParseStallPolicy(StallPolicyName(p)), p);
  }
  EXPECT_EQ(ParseStallPolicy("restart"), std::nullopt);
  for (UnschedulablePolicy p : {UnschedulablePolicy::kWait, UnschedulablePolicy::kFail}) {
    EXPECT_EQ(ParseUnschedulablePolicy(UnschedulablePolicyName(p)), p);
  }
}

}  // namespace
}  // namespace kubetrain::api
