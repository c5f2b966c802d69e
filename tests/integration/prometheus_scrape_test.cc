// The real Prometheus server (Debian's `prometheus`) scrapes a running local
// job every second; its HTTP API then shows every worker stepping:
// rate(kubetrain_steps_total[5s]) > 0 for worker 0 and worker 1.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "runtime/launcher/loopback_ports.h"
#include "tests/integration/metrics_job.h"
#include "tests/support/metrics_test_util.h"
#include "tests/support/running_process.h"
#include "tests/support/subprocess.h"

namespace kubetrain {
namespace {

using metrics::testing_util::HttpGet;
using testing_util::MetricsJob;

// The prometheus server's path, or "" when it is not installed.
std::string PrometheusPath() {
  testing_util::ProcessResult r = testing_util::RunProcess(
      {"/bin/sh", "-c", "command -v prometheus"}, std::chrono::seconds(10));
  if (r.exit_code != 0) return "";
  return std::string(absl::StripTrailingAsciiWhitespace(r.out));
}

// %-encoding for a query string value.
std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += absl::StrCat("%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

TEST(PrometheusScrape, RateOfStepsIsPositiveForEveryWorker) {
  const std::string prometheus_bin = PrometheusPath();
  if (prometheus_bin.empty()) GTEST_SKIP() << "the prometheus server is not installed";
  MetricsJob job;
  job.Start();

  data::testing_util::TempDir dir;
  absl::StatusOr<std::vector<int>> ports = launcher::AllocateLoopbackPorts(1);
  ASSERT_TRUE(ports.ok()) << ports.status();
  const int web_port = (*ports)[0];
  std::vector<std::string> targets;
  for (const auto& [type, index] : job.All()) {
    targets.push_back(absl::StrCat("'127.0.0.1:", job.MetricsPort(type, index), "'"));
  }
  {
    std::ofstream cfg(dir.File("prometheus.yml"));
    cfg << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        // No honor_labels (as under a PodMonitor): the runtime's labels must
        // not clash with the target's job/namespace/instance.
        << "scrape_configs:\n  - job_name: kubetrain-local\n"
        << "    static_configs:\n      - targets: [" << absl::StrJoin(targets, ", ") << "]\n";
  }
  testing_util::RunningProcess prometheus(
      {prometheus_bin, absl::StrCat("--config.file=", dir.File("prometheus.yml")),
       absl::StrCat("--storage.tsdb.path=", dir.File("data")),
       absl::StrCat("--web.listen-address=127.0.0.1:", web_port), "--log.level=warn"},
      {});

  const std::string query = "rate(kubetrain_steps_total{replica_type=\"worker\"}[5s]) > 0";
  const std::string path = absl::StrCat("/api/v1/query?query=", UrlEncode(query));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(45);
  std::set<std::string> stepping;
  std::string last;
  while (stepping.size() < 2 && std::chrono::steady_clock::now() < deadline) {
    ASSERT_FALSE(prometheus.exited()) << prometheus.Output();
    absl::StatusOr<metrics::testing_util::HttpResponse> r = HttpGet(web_port, path);
    if (r.ok() && r->status == 200) {
      last = r->body;
      nlohmann::json j = nlohmann::json::parse(r->body, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.value("status", "") == "success") {
        stepping.clear();
        for (const auto& sample : j["data"]["result"]) {
          EXPECT_EQ(sample["metric"].value("training_job", ""), MetricsJob::kJobName);
          EXPECT_EQ(sample["metric"].value("job", ""), "kubetrain-local");  // the scrape job's
          EXPECT_FALSE(sample["metric"].contains("exported_job")) << sample.dump();
          stepping.insert(sample["metric"].value("replica_index", ""));
        }
      }
    } else {
      last = r.ok() ? absl::StrCat("HTTP ", r->status, " ", r->body) : r.status().ToString();
    }
    if (stepping.size() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  EXPECT_EQ(stepping, (std::set<std::string>{"0", "1"}))
      << "last answer: " << last << "\nprometheus: " << prometheus.Output();
  prometheus.Signal(SIGTERM);
  EXPECT_GE(prometheus.Wait(std::chrono::seconds(15)), 0) << "prometheus did not stop";
  job.Stop();
}

}  // namespace
}  // namespace kubetrain
