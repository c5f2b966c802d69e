// The contract between the runtime's metrics (the writer) and the operator's
// progress poller (the reader), end to end through the names in api/: a
// replica pod as the operator builds it, the environment it gets, the
// runtime's constant labels and series from that environment, scraped as
// Prometheus text and read back as status.progress. A name or label that
// drifts on either side fails here.
#include <prometheus/text_serializer.h>

#include <map>
#include <optional>
#include <string>

#include "api/cluster_spec.h"
#include "api/env_vars.h"
#include "api/metric_names.h"
#include "api/training_job.h"
#include "gtest/gtest.h"
#include "operator/controller/progress_poller.h"
#include "operator/controller/prometheus_text.h"
#include "operator/controller/replica_builder.h"
#include "runtime/metrics/constant_labels.h"
#include "runtime/metrics/runtime_metrics.h"

namespace kubetrain::api {
namespace {

constexpr char kJob[] = R"(
apiVersion: kubetrain.io/v1alpha1
kind: TrainingJob
metadata: {name: contract, namespace: ml, uid: 0123456789abcdef}
spec:
  replicaSpecs:
    Chief:
      template: {spec: {containers: [{name: kubetrain, image: img}]}}
    Worker:
      replicas: 2
      template: {spec: {containers: [{name: kubetrain, image: img}]}}
)";

struct Scrape {
  controller::PrometheusExposition page;
  nlohmann::json pod;
};

// What the operator's poller would scrape from `type`-`index` of kJob.
Scrape ScrapeReplica(ReplicaType type, int index,
                     const std::function<void(metrics::RuntimeMetrics&)>& record) {
  absl::StatusOr<TrainingJob> job = LoadTrainingJob(kJob, "contract.yaml");
  EXPECT_TRUE(job.ok()) << job.status();
  Scrape out;
  out.pod = controller::BuildPod(*job, ToJson(*job), type, index, {});
  // The runtime reads its identity from the environment the operator sets.
  std::map<std::string, std::string> env;
  for (const auto& [name, value] : ReplicaEnvironment(*job, InClusterSpec(*job), type, index, "")) {
    env[name] = value;
  }
  metrics::RuntimeMetricsOptions options;
  options.constant_labels = metrics::ConstantLabelsFromEnv(
      [&env](const std::string& name) -> std::optional<std::string> {
        auto it = env.find(name);
        if (it == env.end()) return std::nullopt;
        return it->second;
      },
      "", "");
  options.training = true;
  options.evaluates = true;
  metrics::RuntimeMetrics runtime(options);
  record(runtime);
  const std::string text = prometheus::TextSerializer().Serialize(runtime.registry()->Collect());
  absl::StatusOr<controller::PrometheusExposition> page = controller::ParsePrometheusText(text);
  EXPECT_TRUE(page.ok()) << page.status();
  if (page.ok()) out.page = *page;
  return out;
}

TEST(MetricContractTest, OperatorReadsWhatTheRuntimeWrites) {
  Scrape chief = ScrapeReplica(ReplicaType::kChief, 0, [](metrics::RuntimeMetrics& m) {
    m.SetGlobalStep(42);
    m.SetTotalSteps(100);
    m.SetTrainingWindow(/*loss=*/0.5, /*accuracy=*/0.75, /*samples_per_second=*/123, 0.1);
    m.SetEvaluation(/*loss=*/0.25, /*accuracy=*/0.875);
  });
  const api::Progress progress = controller::ProgressFromMetrics(chief.page, chief.pod, "contract");
  EXPECT_EQ(progress.step, 42);
  EXPECT_EQ(progress.total_steps, 100);
  EXPECT_EQ(progress.loss, 0.5);
  EXPECT_EQ(progress.accuracy, 0.875) << "the evaluation's accuracy wins over training's";
  EXPECT_EQ(progress.samples_per_second, 123);
}

TEST(MetricContractTest, ConstantLabelsComeFromTheReplicaEnvironment) {
  Scrape worker = ScrapeReplica(ReplicaType::kWorker, 1,
                                [](metrics::RuntimeMetrics& m) { m.SetGlobalStep(7); });
  bool found = false;
  for (const controller::PrometheusSample& s : worker.page.samples) {
    if (s.name != kMetricGlobalStep) continue;
    found = true;
    EXPECT_EQ(s.labels.at(kMetricLabelJob), "contract");
    EXPECT_EQ(s.labels.at(kMetricLabelNamespace), "ml");
    EXPECT_EQ(s.labels.at(kMetricLabelReplicaType), "worker");
    EXPECT_EQ(s.labels.at(kMetricLabelReplicaIndex), "1");
  }
  EXPECT_TRUE(found) << kMetricGlobalStep << " is not on the page";
  // The poller matches the series to the pod it scraped: another job's name
  // reads nothing.
  EXPECT_EQ(controller::ProgressFromMetrics(worker.page, worker.pod, "contract").step, 7);
  EXPECT_FALSE(controller::ProgressFromMetrics(worker.page, worker.pod, "other").step);
}

TEST(MetricContractTest, RankRuleAgreesWithTheEnvironment) {
  absl::StatusOr<TrainingJob> job = LoadTrainingJob(kJob, "contract.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  const ClusterSpec cluster = InClusterSpec(*job);
  for (auto [type, index, rank] :
       {std::tuple{ReplicaType::kChief, 0, 0}, std::tuple{ReplicaType::kWorker, 0, 1},
        std::tuple{ReplicaType::kWorker, 1, 2}}) {
    std::string env_rank;
    for (const auto& [name, value] : ReplicaEnvironment(*job, cluster, type, index, "")) {
      if (name == kEnvRank) env_rank = value;
    }
    EXPECT_EQ(env_rank, std::to_string(rank));
    EXPECT_EQ(WorldRank(ReplicaTypeLower(type), index, 1), rank);
  }
  EXPECT_EQ(WorldRank("ps", 0, 1), std::nullopt);
  EXPECT_EQ(WorldRank("evaluator", 0, 1), std::nullopt);
}

}  // namespace
}  // namespace kubetrain::api
