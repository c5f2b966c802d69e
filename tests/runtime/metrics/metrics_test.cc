// runtime/metrics: names follow Prometheus conventions and are all in
// metric_names.h, constant labels come from the environment, each role
// exports only its families, the HTTP server serves them and stops, and
// promtool accepts the output.
#include <regex>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/metrics/constant_labels.h"
#include "runtime/metrics/metric_names.h"
#include "runtime/metrics/metrics_server.h"
#include "runtime/metrics/runtime_metrics.h"
#include "tests/support/metrics_test_util.h"

namespace kubetrain::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::HttpGet;
using testing_util::SumSeries;

RuntimeMetricsOptions AllRoles() {
  return {.constant_labels = {{"training_job", "fmnist"}, {"replica_type", "worker"}},
          .training = true,
          .evaluates = true,
          .ps_client = true,
          .ps_server = true,
          .allreduce = true,
          .writes_checkpoints = true,
          .start_time_unix_seconds = 1.7e9};
}

// Every family recorded once, so every series exists.
void RecordEverything(RuntimeMetrics& m) {
  m.SetWorld(3, 2, {"worker-0", "worker-1", "worker-2"});
  m.AddMembershipChanges(RuntimeMetrics::MembershipChange::kJoined, 1);
  m.RecordStep({.step_seconds = 0.01,
                .compute_seconds = 0.007,
                .exchange_seconds = 0.003,
                .samples = 64,
                .global_step = 1});
  m.SetTrainingWindow(0.5, 0.8, 1000, 0.05);
  m.SetTotalSteps(100);
  m.SetEvaluation(0.4, 0.85);
  m.RecordExchange(ExchangeOp::kPush, PeerRole::kPs, 0.001, 4096, 0);
  m.RecordExchange(ExchangeOp::kPull, PeerRole::kPs, 0.002, 0, 4096);
  m.AddSentBytes(PeerRole::kWorker, 10);
  m.AddReceivedBytes(PeerRole::kWorker, 20);
  m.AddPeerRestart(PeerRole::kWorker);
  m.SetStalledPeers(1);
  m.SetAllreduceStallSeconds(31);
  m.RecordExchange(ExchangeOp::kAllreduce, PeerRole::kWorker, 0.02, 4096, 4096);
  m.SetWorkersConnected(2);
  m.AddRejectedPush(RejectReason::kNonFinite);
  m.RecordStaleness(3);
  m.RecordCheckpoint(0.2);
  m.AddCheckpointFailure();
  m.SetGpuMemoryUsed("cuda:0", 1 << 20);
}

TEST(MetricNames, FollowPrometheusConventionsAndAreComplete) {
  RuntimeMetrics m(AllRoles());
  RecordEverything(m);
  std::set<std::string> declared;
  const std::regex name_re("^kubetrain_[a-z][a-z0-9_]*[a-z0-9]$");
  for (const MetricName& n : kAllMetrics) {
    EXPECT_TRUE(std::regex_match(n.name, name_re)) << n.name;
    EXPECT_TRUE(declared.insert(n.name).second) << "declared twice: " << n.name;
    EXPECT_GT(std::string(n.help).size(), 10u) << n.name;
    // Units are base units, spelt out.
    for (const char* bad : {"_ms", "_milliseconds", "_kb", "_mb", "_sec_", "_percent"}) {
      EXPECT_THAT(std::string(n.name), Not(HasSubstr(bad))) << n.name;
    }
  }
  std::set<std::string> exported;
  for (const prometheus::MetricFamily& f : m.registry()->Collect()) {
    exported.insert(f.name);
    EXPECT_TRUE(declared.count(f.name)) << f.name << " is not in metric_names.h";
    const bool total = f.name.size() > 6 && f.name.substr(f.name.size() - 6) == "_total";
    if (f.type == prometheus::MetricType::Counter) {
      EXPECT_TRUE(total) << "counter without _total: " << f.name;
    } else {
      EXPECT_FALSE(total) << "_total on a non-counter: " << f.name;
    }
    if (f.type == prometheus::MetricType::Histogram) {
      EXPECT_TRUE(std::regex_search(f.name, std::regex("_(seconds|bytes|steps)$"))) << f.name;
    }
    for (const prometheus::ClientMetric& c : f.metric) {
      std::set<std::string> keys;
      for (const auto& l : c.label) keys.insert(l.name);
      EXPECT_TRUE(keys.count("training_job")) << f.name;
    }
  }
  EXPECT_EQ(exported, declared) << "every declared family is exported by some role";
}

TEST(ConstantLabels, ComeFromTheEnvironmentWithTfConfigFallback) {
  std::map<std::string, std::string> env = {{"KUBETRAIN_JOB_NAME", "fmnist"},
                                            {"KUBETRAIN_NAMESPACE", "team-a"},
                                            {"KUBETRAIN_REPLICA_TYPE", "Worker"},
                                            {"KUBETRAIN_REPLICA_INDEX", "1"}};
  auto lookup = [&env](const std::string& k) -> std::optional<std::string> {
    auto it = env.find(k);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  prometheus::Labels l = ConstantLabelsFromEnv(lookup, "ps", "0");
  EXPECT_EQ(l, (prometheus::Labels{{"training_job", "fmnist"},
                                   {"training_namespace", "team-a"},
                                   {"replica_type", "worker"},
                                   {"replica_index", "1"}}));
  // None of them is a label Prometheus sets on every target: without
  // honor_labels (a PodMonitor's default) a clash would rename ours
  // exported_<name> and the alerts would group by the scrape job instead.
  for (const char* target_label :
       {"job", "namespace", "instance", "pod", "container", "endpoint", "service"}) {
    EXPECT_EQ(l.count(target_label), 0u) << target_label;
  }
  env.clear();
  env["KUBETRAIN_NAMESPACE"] = "";
  l = ConstantLabelsFromEnv(lookup, "ps", "0");
  EXPECT_EQ(l, (prometheus::Labels{{"replica_type", "ps"}, {"replica_index", "0"}}));
  EXPECT_TRUE(ConstantLabelsFromEnv(lookup).empty());
}

TEST(RuntimeMetrics, EachRoleExportsItsOwnFamilies) {
  auto names = [](const RuntimeMetrics& m) {
    std::set<std::string> out;
    for (const auto& f : m.registry()->Collect()) out.insert(f.name);
    return out;
  };
  RuntimeMetrics worker({.constant_labels = {}, .training = true, .ps_client = true});
  RuntimeMetrics ps({.constant_labels = {}, .ps_server = true});
  EXPECT_TRUE(names(worker).count("kubetrain_steps_total"));
  EXPECT_TRUE(names(worker).count("kubetrain_exchange_duration_seconds"));
  EXPECT_FALSE(names(worker).count("kubetrain_ps_workers_connected"));
  EXPECT_FALSE(names(worker).count("kubetrain_eval_accuracy_ratio"));
  EXPECT_TRUE(names(ps).count("kubetrain_ps_workers_connected"));
  EXPECT_TRUE(names(ps).count("kubetrain_checkpoints_written_total"));
  EXPECT_FALSE(names(ps).count("kubetrain_steps_total"));
  // An allreduce worker: collective latency and stalls, no PS families; a
  // PS worker has no allreduce stall gauge.
  RuntimeMetrics ring({.constant_labels = {}, .training = true, .allreduce = true});
  EXPECT_TRUE(names(ring).count("kubetrain_allreduce_stall_seconds"));
  EXPECT_TRUE(names(ring).count("kubetrain_exchange_duration_seconds"));
  EXPECT_TRUE(names(ring).count("kubetrain_stalled_peers"));
  EXPECT_FALSE(names(ring).count("kubetrain_ps_workers_connected"));
  EXPECT_FALSE(names(ring).count("kubetrain_checkpoints_written_total"));
  EXPECT_FALSE(names(worker).count("kubetrain_allreduce_stall_seconds"));
  // Recording into a family the role lacks is a no-op.
  ps.RecordStep({.samples = 1});
  worker.SetWorkersConnected(3);
  EXPECT_FALSE(names(ps).count("kubetrain_steps_total"));
  // GPU memory appears only once reported.
  EXPECT_FALSE(names(worker).count("kubetrain_gpu_memory_used_bytes"));
  worker.SetGpuMemoryUsed("cuda:0", 42);
  EXPECT_TRUE(names(worker).count("kubetrain_gpu_memory_used_bytes"));
}

TEST(RuntimeMetrics, ValuesAndLabels) {
  RuntimeMetrics m(AllRoles());
  RecordEverything(m);
  m.RecordStep({.samples = 64, .global_step = 2});
  const std::string text = SerializeMetrics(*m.registry());
  EXPECT_EQ(SumSeries(text, "kubetrain_steps_total"), 2);
  EXPECT_EQ(SumSeries(text, "kubetrain_samples_total"), 128);
  EXPECT_EQ(SumSeries(text, "kubetrain_global_step"), 2);
  EXPECT_EQ(SumSeries(text, "kubetrain_exchange_sent_bytes_total", {"peer_role=\"ps\""}), 4096);
  // 20 from a PS's worker, 4096 from an allreduce bucket.
  EXPECT_EQ(SumSeries(text, "kubetrain_exchange_received_bytes_total", {"peer_role=\"worker\""}),
            4116);
  EXPECT_EQ(SumSeries(text, "kubetrain_exchange_duration_seconds_count", {"op=\"allreduce\""}), 1);
  EXPECT_EQ(SumSeries(text, "kubetrain_allreduce_stall_seconds"), 31);
  EXPECT_EQ(SumSeries(text, "kubetrain_ps_rejected_pushes_total", {"reason=\"non_finite\""}), 1);
  EXPECT_EQ(SumSeries(text, "kubetrain_ps_rejected_pushes_total"), 1);
  EXPECT_EQ(SumSeries(text, "kubetrain_exchange_duration_seconds_count", {"op=\"pull\""}), 1);
  EXPECT_EQ(SumSeries(text, "kubetrain_start_time_seconds"), 1.7e9);
  EXPECT_THAT(
      text, HasSubstr("kubetrain_steps_total{replica_type=\"worker\",training_job=\"fmnist\"} 2"));
}

TEST(RuntimeMetrics, PromtoolAcceptsTheOutput) {
  if (!testing_util::HavePromtool()) GTEST_SKIP() << "promtool is not installed";
  RuntimeMetrics m(AllRoles());
  RecordEverything(m);
  testing_util::PromtoolResult r =
      testing_util::PromtoolCheckMetrics(SerializeMetrics(*m.registry()));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "");
}

TEST(MetricsServer, ServesMetricsAndStops) {
  RuntimeMetrics m(AllRoles());
  m.RecordStep({.samples = 5});
  absl::StatusOr<std::unique_ptr<MetricsServer>> server =
      MetricsServer::Start("127.0.0.1", 0, m.registry());
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  ASSERT_GT(port, 0);
  absl::StatusOr<testing_util::HttpResponse> r = HttpGet(port, "/metrics");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(SumSeries(r->body, "kubetrain_samples_total"), 5);
  // Values are live.
  m.RecordStep({.samples = 5});
  r = HttpGet(port, "/metrics?x=1");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(SumSeries(r->body, "kubetrain_samples_total"), 10);
  r = HttpGet(port, "/other");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 404);

  // The port is taken while it serves: a second server reports it.
  absl::StatusOr<std::unique_ptr<MetricsServer>> second =
      MetricsServer::Start("127.0.0.1", port, m.registry());
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("cannot serve metrics on"));
  EXPECT_FALSE(MetricsServer::Start("not-an-ip", 0, m.registry()).ok());

  server->reset();  // stops and closes the socket
  EXPECT_FALSE(HttpGet(port, "/metrics").ok());
  // ...so the port can be served again.
  EXPECT_TRUE(MetricsServer::Start("127.0.0.1", port, m.registry()).ok());
}

}  // namespace
}  // namespace kubetrain::metrics
