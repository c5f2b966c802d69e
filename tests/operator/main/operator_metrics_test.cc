// The operator's Prometheus metrics (names, labels, series replacement,
// the work queue observer, promtool's lint), the /metrics endpoint and the
// health probe server, in process.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <prometheus/text_serializer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "operator/health_server.h"
#include "operator/kube/rate_limiter.h"
#include "operator/kube/work_queue.h"
#include "operator/metrics/metric_names.h"
#include "operator/metrics/metrics_endpoint.h"
#include "operator/metrics/prometheus_operator_metrics.h"
#include "tests/support/metrics_test_util.h"

namespace kubetrain::operator_metrics {
namespace {

using metrics::testing_util::HttpTry;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Scrape(prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

// A socket listening on 127.0.0.1, holding its port.
class TakenPort {
 public:
  TakenPort() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, 1), 0);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~TakenPort() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// The names deploy/prometheus/alert-rules.yaml and the Grafana dashboard use.
TEST(OperatorMetricNamesTest, NamesAreTheOnesDashboardsUse) {
  EXPECT_STREQ(kJobsCreatedTotal, "kubetrain_operator_jobs_created_total");
  EXPECT_STREQ(kJobsSucceededTotal, "kubetrain_operator_jobs_succeeded_total");
  EXPECT_STREQ(kJobsFailedTotal, "kubetrain_operator_jobs_failed_total");
  EXPECT_STREQ(kJobsRestartedTotal, "kubetrain_operator_jobs_restarted_total");
  EXPECT_STREQ(kPodsCreatedTotal, "kubetrain_operator_pods_created_total");
  EXPECT_STREQ(kMembershipChangesTotal, "kubetrain_operator_membership_changes_total");
  EXPECT_STREQ(kJobs, "kubetrain_operator_jobs");
  EXPECT_STREQ(kReconcileDurationSeconds, "kubetrain_operator_reconcile_duration_seconds");
  EXPECT_STREQ(kReconcileErrorsTotal, "kubetrain_operator_reconcile_errors_total");
  EXPECT_STREQ(kWorkqueueDepth, "kubetrain_operator_workqueue_depth");
  EXPECT_STREQ(kIsLeader, "kubetrain_operator_is_leader");
}

TEST(PrometheusOperatorMetricsTest, LabelLessSeriesExistFromTheStart) {
  prometheus::Registry registry;
  PrometheusOperatorMetrics metrics(registry);
  const std::string text = Scrape(registry);
  EXPECT_THAT(text, HasSubstr("\nkubetrain_operator_is_leader 0\n"));
  EXPECT_THAT(text, HasSubstr("\nkubetrain_operator_workqueue_depth 0\n"));
  EXPECT_THAT(text, HasSubstr("\nkubetrain_operator_reconcile_errors_total 0\n"));
  EXPECT_THAT(text, HasSubstr("\nkubetrain_operator_workqueue_adds_total 0\n"));
  EXPECT_THAT(text, HasSubstr("\nkubetrain_operator_workqueue_retries_total 0\n"));
  EXPECT_THAT(text, HasSubstr("\nkubetrain_operator_reconcile_duration_seconds_count 0\n"));
  EXPECT_THAT(text, HasSubstr("\nkubetrain_operator_workqueue_queue_duration_seconds_count 0\n"));
}

TEST(PrometheusOperatorMetricsTest, CountersPerNamespace) {
  prometheus::Registry registry;
  PrometheusOperatorMetrics metrics(registry);
  metrics.JobCreated("team-a");
  metrics.JobCreated("team-a");
  metrics.JobCreated("team-b");
  metrics.JobSucceeded("team-a");
  metrics.JobFailed("team-b");
  metrics.JobRestarted("team-b");
  metrics.JobRestarted("team-b");
  metrics.JobRestarted("team-b");
  for (int i = 0; i < 4; ++i) metrics.PodCreated("team-a");
  metrics.MembershipChanged("team-b");
  metrics.MembershipChanged("team-b");
  const std::string text = Scrape(registry);
  EXPECT_THAT(
      text, HasSubstr("kubetrain_operator_jobs_created_total{training_namespace=\"team-a\"} 2\n"));
  EXPECT_THAT(
      text, HasSubstr("kubetrain_operator_jobs_created_total{training_namespace=\"team-b\"} 1\n"));
  EXPECT_THAT(
      text,
      HasSubstr("kubetrain_operator_jobs_succeeded_total{training_namespace=\"team-a\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("kubetrain_operator_jobs_failed_total{training_namespace=\"team-b\"} 1\n"));
  EXPECT_THAT(
      text,
      HasSubstr("kubetrain_operator_jobs_restarted_total{training_namespace=\"team-b\"} 3\n"));
  EXPECT_THAT(
      text, HasSubstr("kubetrain_operator_pods_created_total{training_namespace=\"team-a\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("kubetrain_operator_membership_changes_total{training_namespace="
                              "\"team-b\"} 2\n"));
}

TEST(PrometheusOperatorMetricsTest, SetJobPhasesReplacesEverySeries) {
  prometheus::Registry registry;
  PrometheusOperatorMetrics metrics(registry);
  metrics.SetJobPhases({{{"a", "Running"}, 2}, {{"a", "Succeeded"}, 1}, {{"b", "Failed"}, 3}});
  std::string text = Scrape(registry);
  EXPECT_THAT(text,
              HasSubstr("kubetrain_operator_jobs{phase=\"Running\",training_namespace=\"a\"} 2\n"));
  EXPECT_THAT(
      text, HasSubstr("kubetrain_operator_jobs{phase=\"Succeeded\",training_namespace=\"a\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("kubetrain_operator_jobs{phase=\"Failed\",training_namespace=\"b\"} 3\n"));

  // a's job finished, b's were deleted: their series go away.
  metrics.SetJobPhases({{{"a", "Succeeded"}, 3}});
  text = Scrape(registry);
  EXPECT_THAT(
      text, HasSubstr("kubetrain_operator_jobs{phase=\"Succeeded\",training_namespace=\"a\"} 3\n"));
  EXPECT_THAT(text, Not(HasSubstr("phase=\"Running\"")));
  EXPECT_THAT(text, Not(HasSubstr("training_namespace=\"b\"")));

  metrics.SetJobPhases({});
  EXPECT_THAT(Scrape(registry), Not(HasSubstr("kubetrain_operator_jobs{")));
}

TEST(PrometheusOperatorMetricsTest, ReconcileHistogramFrom1msTo10s) {
  ASSERT_FALSE(ReconcileBuckets().empty());
  EXPECT_DOUBLE_EQ(ReconcileBuckets().front(), 0.001);
  EXPECT_DOUBLE_EQ(ReconcileBuckets().back(), 10);
  prometheus::Registry registry;
  PrometheusOperatorMetrics metrics(registry);
  metrics.ObserveReconcile(0.0004, false);
  metrics.ObserveReconcile(0.2, true);
  metrics.ObserveReconcile(30, true);
  const std::string text = Scrape(registry);
  EXPECT_THAT(text,
              HasSubstr("kubetrain_operator_reconcile_duration_seconds_bucket{le=\"0.001\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("kubetrain_operator_reconcile_duration_seconds_bucket{le=\"10\"} 2\n"));
  EXPECT_THAT(text,
              HasSubstr("kubetrain_operator_reconcile_duration_seconds_bucket{le=\"+Inf\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("kubetrain_operator_reconcile_duration_seconds_count 3\n"));
  EXPECT_THAT(text, HasSubstr("\nkubetrain_operator_reconcile_errors_total 2\n"));
}

TEST(PrometheusOperatorMetricsTest, LeaderAndQueueDepth) {
  prometheus::Registry registry;
  PrometheusOperatorMetrics metrics(registry);
  metrics.SetLeader(true);
  metrics.SetQueueDepth(7);
  EXPECT_THAT(Scrape(registry), HasSubstr("\nkubetrain_operator_is_leader 1\n"));
  EXPECT_THAT(Scrape(registry), HasSubstr("\nkubetrain_operator_workqueue_depth 7\n"));
  metrics.SetLeader(false);
  EXPECT_THAT(Scrape(registry), HasSubstr("\nkubetrain_operator_is_leader 0\n"));
}

// The observer on a real WorkQueue: depth follows the queue, adds and
// retries count, queue time is observed when a worker takes an item.
TEST(PrometheusOperatorMetricsTest, QueueObserverFollowsARealQueue) {
  prometheus::Registry registry;
  PrometheusOperatorMetrics metrics(registry);
  const RealClock clock;
  {
    kube::WorkQueue queue(
        kube::NewItemExponentialRateLimiter(absl::Milliseconds(5), absl::Seconds(1)), clock,
        metrics.queue_observer());
    queue.Add("ns/a");
    queue.Add("ns/b");
    queue.Add("ns/a");  // de-duplicated: not an add
    EXPECT_THAT(Scrape(registry), HasSubstr("\nkubetrain_operator_workqueue_depth 2\n"));
    EXPECT_THAT(Scrape(registry), HasSubstr("\nkubetrain_operator_workqueue_adds_total 2\n"));
    std::string item;
    ASSERT_TRUE(queue.Get(&item));
    EXPECT_THAT(Scrape(registry), HasSubstr("\nkubetrain_operator_workqueue_depth 1\n"));
    queue.AddRateLimited(item);
    queue.Done(item);
    EXPECT_THAT(Scrape(registry), HasSubstr("\nkubetrain_operator_workqueue_retries_total 1\n"));
    EXPECT_THAT(Scrape(registry),
                HasSubstr("\nkubetrain_operator_workqueue_queue_duration_seconds_count 1\n"));
    queue.ShutDown();
  }
}

TEST(PrometheusOperatorMetricsTest, ScrapePassesPromtool) {
  if (!metrics::testing_util::HavePromtool())
    GTEST_SKIP() << "promtool is not installed (Debian package prometheus)";
  prometheus::Registry registry;
  PrometheusOperatorMetrics metrics(registry);
  metrics.JobCreated("a");
  metrics.JobSucceeded("a");
  metrics.JobFailed("a");
  metrics.JobRestarted("a");
  metrics.PodCreated("a");
  metrics.SetJobPhases({{{"a", "Running"}, 1}});
  metrics.ObserveReconcile(0.01, true);
  metrics.SetLeader(true);
  metrics.queue_observer()->OnLatency(absl::Milliseconds(3));
  const metrics::testing_util::PromtoolResult r =
      metrics::testing_util::PromtoolCheckMetrics(Scrape(registry));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "");
}

TEST(MetricsEndpointTest, ServesTheRegistryOnAnyFreePort) {
  auto registry = std::make_shared<prometheus::Registry>();
  PrometheusOperatorMetrics metrics(*registry);
  metrics.SetLeader(true);
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint =
      MetricsEndpoint::Start("127.0.0.1:0", "127.0.0.1:0", registry);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  ASSERT_GT((*endpoint)->port(), 0);
  const auto answer = HttpTry((*endpoint)->port(), "/metrics");
  EXPECT_EQ(answer.status, 200);
  EXPECT_THAT(answer.body, HasSubstr("\nkubetrain_operator_is_leader 1\n"));
}

TEST(MetricsEndpointTest, AddressInUseIsAStatusNamingTheAddress) {
  TakenPort taken;
  const std::string address = absl::StrCat("127.0.0.1:", taken.port());
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint =
      MetricsEndpoint::Start(address, address, std::make_shared<prometheus::Registry>());
  ASSERT_FALSE(endpoint.ok());
  EXPECT_THAT(std::string(endpoint.status().message()),
              HasSubstr(absl::StrCat("cannot serve metrics on ", address)));
}

}  // namespace
}  // namespace kubetrain::operator_metrics

namespace kubetrain::operator_main {
namespace {

using metrics::testing_util::HttpTry;
using ::testing::HasSubstr;

TEST(HealthServerTest, ProbesFollowTheirChecks) {
  std::atomic<bool> ready{false};
  HealthChecks checks;
  checks.ready = [&]() -> absl::Status {
    return ready.load() ? absl::OkStatus() : absl::UnavailableError("informers not synced yet");
  };
  absl::StatusOr<std::unique_ptr<HealthServer>> server =
      HealthServer::Start("127.0.0.1:0", "127.0.0.1:0", std::move(checks));
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  ASSERT_GT(port, 0);

  auto healthz = HttpTry(port, "/healthz");
  EXPECT_EQ(healthz.status, 200);
  EXPECT_EQ(healthz.body, "ok\n");
  auto readyz = HttpTry(port, "/readyz");
  EXPECT_EQ(readyz.status, 503);
  EXPECT_EQ(readyz.body, "informers not synced yet\n");
  ready.store(true);
  readyz = HttpTry(port, "/readyz");
  EXPECT_EQ(readyz.status, 200);
  EXPECT_EQ(readyz.body, "ok\n");

  EXPECT_EQ(HttpTry(port, "/metrics").status, 404);
  EXPECT_EQ(HttpTry(port, "/").status, 404);
  EXPECT_EQ(HttpTry(port, "/healthz/extra").status, 404);
  EXPECT_EQ(HttpTry(port, "/readyz?verbose=1").status, 200);
  EXPECT_EQ(HttpTry(port, "/healthz", "POST").status, 405);
  auto head = HttpTry(port, "/healthz", "HEAD");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.body, "");
}

TEST(HealthServerTest, FailingLivenessIs500) {
  HealthChecks checks;
  checks.live = [] { return absl::InternalError("deadlocked"); };
  absl::StatusOr<std::unique_ptr<HealthServer>> server =
      HealthServer::Start("127.0.0.1:0", "127.0.0.1:0", std::move(checks));
  ASSERT_TRUE(server.ok()) << server.status();
  auto healthz = HttpTry((*server)->port(), "/healthz");
  EXPECT_EQ(healthz.status, 500);
  EXPECT_EQ(healthz.body, "deadlocked\n");
  // No ready check: always ready.
  EXPECT_EQ(HttpTry((*server)->port(), "/readyz").status, 200);
}

TEST(HealthServerTest, AddressInUseIsAStatusNamingTheAddress) {
  operator_metrics::TakenPort taken;
  const std::string address = absl::StrCat("127.0.0.1:", taken.port());
  absl::StatusOr<std::unique_ptr<HealthServer>> server =
      HealthServer::Start(address, address, HealthChecks{});
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()),
              HasSubstr(absl::StrCat("cannot serve health probes on ", address)));
}

TEST(HealthServerTest, StopsPromptlyWhileChecksAreCalled) {
  std::atomic<int> calls{0};
  HealthChecks checks;
  checks.ready = [&] {
    calls.fetch_add(1);
    return absl::OkStatus();
  };
  absl::StatusOr<std::unique_ptr<HealthServer>> server =
      HealthServer::Start("127.0.0.1:0", "127.0.0.1:0", std::move(checks));
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  std::atomic<bool> stop{false};
  std::thread prober([&] {
    while (!stop.load()) HttpTry(port, "/readyz", "GET", std::chrono::milliseconds(500));
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (calls.load() < 20 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  if (calls.load() < 20) {
    stop.store(true);
    prober.join();
    FAIL() << "the prober got no answers";
  }
  server->reset();  // must not wait for the prober or crash under it
  const int after = calls.load();
  stop.store(true);
  prober.join();
  EXPECT_EQ(calls.load(), after);  // no check runs after destruction
}

}  // namespace
}  // namespace kubetrain::operator_main
