// `top`: the metrics-to-row computation, who a stalled replica waits for,
// the table, and rows for replicas whose metrics cannot be read.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/tools/kubectl_kubetrain/fake_cluster_reader.h"
#include "tools/kubectl_kubetrain/replica_metrics.h"
#include "tools/kubectl_kubetrain/top_command.h"
#include "tools/kubectl_kubetrain/top_table.h"

namespace kubetrain::kubectl_plugin {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Page(int step, double step_sum, double exchange_sum, double stall = 0) {
  return "# TYPE kubetrain_global_step gauge\n"
         "kubetrain_global_step{training_job=\"fm\",replica_type=\"worker\"} " +
         std::to_string(step) +
         "\nkubetrain_samples_per_second 5230.5\n"
         "kubetrain_step_duration_seconds_sum " +
         std::to_string(step_sum) +
         "\nkubetrain_step_phase_duration_seconds_sum{phase=\"compute\"} 1\n"
         "kubetrain_step_phase_duration_seconds_sum{phase=\"exchange\"} " +
         std::to_string(exchange_sum) + "\nkubetrain_allreduce_stall_seconds " +
         std::to_string(stall) + "\nkubetrain_stalled_peers 0\n";
}

ReplicaMetrics Read(const std::string& text, const ReplicaMetrics* previous = nullptr) {
  return ReadReplicaMetrics(*controller::ParsePrometheusText(text), previous);
}

TEST(ReplicaMetricsTest, ExchangeShareSinceStartThenOverTheInterval) {
  ReplicaMetrics first = Read(Page(100, 10, 4));
  EXPECT_EQ(first.step, 100);
  EXPECT_DOUBLE_EQ(*first.samples_per_second, 5230.5);
  EXPECT_DOUBLE_EQ(*first.exchange_share, 0.4);
  EXPECT_TRUE(first.exchange_share_since_start);
  ReplicaMetrics second = Read(Page(200, 20, 13), &first);
  EXPECT_DOUBLE_EQ(*second.exchange_share, 0.9);
  EXPECT_FALSE(second.exchange_share_since_start);
  // A restarted replica's sums start again: the share is its own since start.
  ReplicaMetrics restarted = Read(Page(210, 2, 1), &second);
  EXPECT_DOUBLE_EQ(*restarted.exchange_share, 0.5);
  EXPECT_TRUE(restarted.exchange_share_since_start);
  // A parameter server exports none of the training families.
  ReplicaMetrics ps = Read("kubetrain_stalled_peers 1\n");
  EXPECT_FALSE(ps.step.has_value());
  EXPECT_FALSE(ps.exchange_share.has_value());
  EXPECT_EQ(ps.stalled_peers, 1);
}

TopRow Row(int index, const std::string& page) {
  TopRow row;
  row.replica.type = "worker";
  row.replica.index = index;
  row.pod = "fm-worker-" + std::to_string(index);
  row.metrics = Read(page);
  return row;
}

TEST(TopTableTest, AStalledReplicaWaitsForTheSilentOrThoseBehind) {
  std::vector<TopRow> rows = {Row(0, Page(121, 10, 9, 42)), Row(1, Page(120, 10, 1)),
                              Row(2, Page(121, 10, 9, 40))};
  EXPECT_THAT(WaitsFor(rows, 0), ElementsAre("worker-1"));
  EXPECT_TRUE(WaitsFor(rows, 1).empty());
  rows[1].metrics.reset();
  rows[1].problem = "metrics: connection refused";
  EXPECT_THAT(WaitsFor(rows, 2), ElementsAre("worker-1"));
  std::string table = RenderTopTable(rows);
  EXPECT_THAT(table,
              HasSubstr("REPLICA   POD          RESTARTS  STEP  SAMPLES/S  EXCHANGE  STALL"));
  EXPECT_THAT(
      table,
      HasSubstr("worker-0  fm-worker-0  0         121   5230.5     90%*      42s    worker-1\n"));
  EXPECT_THAT(table, HasSubstr("worker-1  fm-worker-1  0         -     -          -         -      "
                               "(metrics: connection refused)\n"));
}

TEST(TopCommandTest, RowsSayWhyMetricsAreMissing) {
  FakeClusterReader api;
  api.SetJob(JobWithPhase("fm", "Running"));
  api.SetPods({ReplicaPod("fm", "worker", 1, "w1", 0, "running"),
               ReplicaPod("fm", "worker", 0, "w0", 0, "running"),
               ReplicaPod("fm", "ps", 0, "p0", 0, "waiting", "Pending"),
               ReplicaPod("fm", "worker", 2, "w2", 0, "running")});
  api.SetMetrics("fm-worker-0", Page(10, 10, 5));
  api.SetMetrics("fm-worker-2", std::string("not a page {"));
  std::map<std::string, ReplicaMetrics> previous;
  absl::StatusOr<TopSnapshot> snapshot = CollectTop(api, "ns", "fm", &previous);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->phase, "Running");
  ASSERT_EQ(snapshot->rows.size(), 4u);
  EXPECT_EQ(snapshot->rows[0].problem, "pod Pending: ContainerCreating");
  EXPECT_EQ(snapshot->rows[1].metrics->step, 10);
  EXPECT_EQ(snapshot->rows[2].problem, "metrics: no endpoints available");
  EXPECT_THAT(snapshot->rows[3].problem, HasSubstr("metrics page: "));
  EXPECT_EQ(previous.count("w0"), 1u);
  api.SetMetrics("fm-worker-0", Page(20, 20, 6));
  snapshot = CollectTop(api, "ns", "fm", &previous);
  EXPECT_DOUBLE_EQ(*snapshot->rows[1].metrics->exchange_share, 0.1);
  FakeClusterReader none;
  EXPECT_TRUE(absl::IsNotFound(CollectTop(none, "ns", "fm", nullptr).status()));
}

}  // namespace
}  // namespace kubetrain::kubectl_plugin
