// deploy/grafana/kubetrain-dashboard.json: parses, every panel has a query,
// and every metric its PromQL (and the alert rules') names exists: in a real
// scrape of a running local job's replicas, or among the operator's metrics.
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "operator/metrics/metric_names.h"
#include "tests/integration/metrics_job.h"
#include "tests/support/metrics_test_util.h"

namespace kubetrain {
namespace {

using testing_util::MetricsJob;

// The operator's metrics, by the names operator/metrics/metric_names.h
// gives them: renaming one there breaks the dashboard queries that use the
// old name. A metric added there must be added here with its type.
const char* const kOperatorCounters[] = {
    operator_metrics::kJobsCreatedTotal,      operator_metrics::kJobsSucceededTotal,
    operator_metrics::kJobsFailedTotal,       operator_metrics::kJobsRestartedTotal,
    operator_metrics::kPodsCreatedTotal,      operator_metrics::kReconcileErrorsTotal,
    operator_metrics::kWorkqueueAddsTotal,    operator_metrics::kWorkqueueRetriesTotal,
    operator_metrics::kMembershipChangesTotal};
const char* const kOperatorGauges[] = {operator_metrics::kJobs, operator_metrics::kWorkqueueDepth,
                                       operator_metrics::kIsLeader};
const char* const kOperatorHistograms[] = {operator_metrics::kReconcileDurationSeconds,
                                           operator_metrics::kWorkqueueQueueDurationSeconds};

std::set<std::string> OperatorSeriesNames() {
  std::set<std::string> s(std::begin(kOperatorCounters), std::end(kOperatorCounters));
  s.insert(std::begin(kOperatorGauges), std::end(kOperatorGauges));
  for (const char* h : kOperatorHistograms) {
    for (const char* suffix : {"_bucket", "_sum", "_count"}) s.insert(std::string(h) + suffix);
  }
  return s;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Metric names in a PromQL expression: every kubetrain_* identifier that
// is not a label name inside {...} or by/without/on/ignoring (...).
std::set<std::string> MetricNamesIn(const std::string& expr) {
  // Drop label matchers and grouping lists, which hold label names only.
  std::string e = std::regex_replace(expr, std::regex("\\{[^}]*\\}"), " ");
  e = std::regex_replace(
      e, std::regex("\\b(by|without|on|ignoring|group_left|group_right)\\s*\\([^)]*\\)"), " ");
  std::set<std::string> names;
  static const std::regex ident("(^|[^a-zA-Z0-9_:])(kubetrain_[a-zA-Z0-9_:]*)");
  for (auto it = std::sregex_iterator(e.begin(), e.end(), ident); it != std::sregex_iterator();
       ++it) {
    names.insert((*it)[2].str());
  }
  return names;
}

void CollectPanels(const nlohmann::json& panels, std::vector<nlohmann::json>* out) {
  for (const nlohmann::json& p : panels) {
    out->push_back(p);
    if (p.contains("panels")) CollectPanels(p["panels"], out);
  }
}

TEST(MetricNamesIn, SkipsLabelsAndFunctions) {
  EXPECT_EQ(MetricNamesIn("sum by (kubetrain_x) (rate(kubetrain_steps_total{job=~\"$job\", "
                          "kubetrain_y=\"a\"}[1m])) / kubetrain_total_steps"),
            (std::set<std::string>{"kubetrain_steps_total", "kubetrain_total_steps"}));
}

TEST(Dashboard, EveryPanelQueriesMetricsThatExist) {
  const std::string dashboard_path =
      std::string(KUBETRAIN_SOURCE_DIR) + "/deploy/grafana/kubetrain-dashboard.json";
  const nlohmann::json dash =
      nlohmann::json::parse(ReadFile(dashboard_path), nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(dash.is_discarded()) << dashboard_path << " is not valid JSON";
  ASSERT_TRUE(dash.contains("panels"));

  // Every query of every panel and template variable, with where it is.
  std::vector<std::pair<std::string, std::string>> exprs;
  std::vector<nlohmann::json> panels;
  CollectPanels(dash["panels"], &panels);
  ASSERT_GE(panels.size(), 20u);
  std::set<std::string> titles;
  for (const nlohmann::json& p : panels) {
    const std::string type = p.value("type", "");
    const std::string title = p.value("title", "");
    if (type == "row" || type == "text") continue;
    EXPECT_TRUE(titles.insert(title).second) << "two panels titled " << title;
    ASSERT_TRUE(p.contains("targets") && !p["targets"].empty())
        << "panel without a query: " << title;
    for (const nlohmann::json& t : p["targets"]) {
      const std::string expr = t.value("expr", "");
      EXPECT_FALSE(expr.empty()) << "panel with an empty query: " << title;
      EXPECT_FALSE(MetricNamesIn(expr).empty()) << title << ": no kubetrain metric in " << expr;
      exprs.emplace_back(title, expr);
    }
  }
  std::set<std::string> variables;
  for (const nlohmann::json& v : dash["templating"]["list"]) {
    variables.insert(v.value("name", ""));
    if (v.value("type", "") == "query")
      exprs.emplace_back("variable " + v.value("name", ""), v["query"].value("query", ""));
  }
  EXPECT_TRUE(variables.count("namespace") && variables.count("job"));
  // The alert rules must name real metrics too.
  std::istringstream rules(
      ReadFile(std::string(KUBETRAIN_SOURCE_DIR) + "/deploy/prometheus/alert-rules.yaml"));
  for (std::string line; std::getline(rules, line);) {
    const size_t first = line.find_first_not_of(' ');
    if (first == std::string::npos || line[first] == '#') continue;
    if (line.find("summary:") != std::string::npos ||
        line.find("description:") != std::string::npos)
      continue;
    exprs.emplace_back("alert-rules.yaml", line);
  }

  // What running jobs' replicas really export: a parameter-server job and
  // an allreduce job.
  std::set<std::string> known = OperatorSeriesNames();
  for (int num_ps : {1, 0}) {
    MetricsJob job(num_ps);
    job.Start();
    for (const auto& [type, index] : job.All()) {
      std::string body;
      ASSERT_TRUE(job.WaitForScrape(
          type, index,
          [](const std::string& t) {
            return metrics::testing_util::SumSeries(t, "kubetrain_global_step").value_or(0) > 0;
          },
          std::chrono::seconds(30), &body))
          << type << "-" << index << ": " << body;
      for (const std::string& n : metrics::testing_util::SampleNames(body)) known.insert(n);
    }
    job.Stop();
  }

  int checked = 0;
  for (const auto& [where, expr] : exprs) {
    for (const std::string& name : MetricNamesIn(expr)) {
      ++checked;
      EXPECT_TRUE(known.count(name)) << where << ": " << name << " is neither exported by a "
                                     << "replica nor an operator metric (" << expr << ")";
    }
  }
  EXPECT_GT(checked, 40);
}

}  // namespace
}  // namespace kubetrain
