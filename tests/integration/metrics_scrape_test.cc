// Every replica of a running local job (1 PS + 2 workers) serves /metrics:
// values move between scrapes, the PS sees both workers, promtool accepts
// every scrape, and the PS's server closes when it stops on SIGTERM.
#include <signal.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/metrics_job.h"
#include "tests/support/metrics_test_util.h"

namespace kubetrain {
namespace {

using metrics::testing_util::SumSeries;
using testing_util::MetricsJob;

constexpr auto kWait = std::chrono::seconds(30);

double Value(const std::string& text, const std::string& name,
             const std::set<std::string>& labels = {}) {
  return SumSeries(text, name, labels).value_or(-1);
}

TEST(MetricsScrape, EveryReplicaServesMovingValues) {
  MetricsJob job;
  job.Start();
  std::string last;
  for (int w = 0; w < 2; ++w) {
    ASSERT_TRUE(job.WaitForScrape(
        "worker", w, [](const std::string& t) { return Value(t, "kubetrain_steps_total") > 0; },
        kWait, &last))
        << "worker-" << w << ": " << last << "\n"
        << job.replicas().Output("worker", w);
    const std::string first = last;
    const double steps = Value(first, "kubetrain_steps_total");
    ASSERT_TRUE(job.WaitForScrape(
        "worker", w,
        [steps](const std::string& t) { return Value(t, "kubetrain_steps_total") > steps; }, kWait,
        &last))
        << last;
    const std::string second = last;
    EXPECT_GT(Value(second, "kubetrain_samples_total"), Value(first, "kubetrain_samples_total"));
    EXPECT_GT(Value(second, "kubetrain_exchange_sent_bytes_total", {"peer_role=\"ps\""}), 0);
    EXPECT_GT(Value(second, "kubetrain_exchange_received_bytes_total", {"peer_role=\"ps\""}), 0);
    EXPECT_GT(Value(second, "kubetrain_exchange_duration_seconds_count", {"op=\"push\""}), 0);
    EXPECT_GT(Value(second, "kubetrain_step_duration_seconds_count"), 0);
    EXPECT_GT(Value(second, "kubetrain_total_steps"), Value(second, "kubetrain_global_step"));
    // The environment's constant labels.
    EXPECT_THAT(second, ::testing::HasSubstr(absl::StrCat(
                            "kubetrain_steps_total{replica_index=\"", w,
                            "\",replica_type=\"worker\",training_job=\"", MetricsJob::kJobName,
                            "\",training_namespace=\"", MetricsJob::kNamespace, "\"}")));
  }
  // The PS: both workers connected, gradients arriving, updates applied.
  ASSERT_TRUE(job.WaitForScrape(
      "ps", 0,
      [](const std::string& t) {
        return Value(t, "kubetrain_ps_workers_connected") == 2 &&
               Value(t, "kubetrain_exchange_received_bytes_total", {"peer_role=\"worker\""}) > 0 &&
               Value(t, "kubetrain_global_step") > 0;
      },
      kWait, &last))
      << last << "\n"
      << job.replicas().Output("ps", 0);
  const double ps_step = Value(last, "kubetrain_global_step");
  ASSERT_TRUE(job.WaitForScrape(
      "ps", 0,
      [ps_step](const std::string& t) { return Value(t, "kubetrain_global_step") > ps_step; },
      kWait, &last));
  EXPECT_EQ(Value(last, "kubetrain_ps_rejected_pushes_total"), 0);
  EXPECT_EQ(Value(last, "kubetrain_stalled_peers"), 0);

  // Every endpoint's page, for promtool at the end.
  std::vector<std::pair<std::string, std::string>> pages;
  for (const auto& [type, index] : job.All()) {
    absl::StatusOr<std::string> body = job.Scrape(type, index);
    ASSERT_TRUE(body.ok()) << body.status();
    pages.emplace_back(absl::StrCat(type, "-", index), *std::move(body));
  }

  // SIGTERM: the PS stops (128+15) and its metrics server with it.
  const int ps_port = job.MetricsPort("ps", 0);
  job.Stop();
  EXPECT_EQ(job.replicas().ExitCode("ps", 0), 128 + SIGTERM) << job.replicas().Output("ps", 0);
  EXPECT_FALSE(metrics::testing_util::HttpGet(ps_port, "/metrics").ok());

  // promtool has nothing to say about any endpoint. Everything above has been
  // checked when this skips.
  if (!metrics::testing_util::HavePromtool()) {
    GTEST_SKIP() << "promtool check metrics: promtool is not installed";
  }
  for (const auto& [replica, page] : pages) {
    metrics::testing_util::PromtoolResult r = metrics::testing_util::PromtoolCheckMetrics(page);
    EXPECT_EQ(r.exit_code, 0) << replica << ": " << r.output;
    EXPECT_EQ(r.output, "") << replica;
  }
}

}  // namespace
}  // namespace kubetrain
