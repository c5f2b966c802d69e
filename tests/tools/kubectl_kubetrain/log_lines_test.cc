// Line prefixes, timestamps and the time-ordered merge; replica names.
#include "tools/kubectl_kubetrain/log_lines.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/tools/kubectl_kubetrain/fake_cluster_reader.h"

namespace kubetrain::kubectl_plugin {
namespace {

TEST(LogLinesTest, PrefixNamesReplicaAndRestart) {
  EXPECT_EQ(LogPrefix({"worker", 3}, 2), "[worker-3 r2] ");
  EXPECT_EQ(LogPrefix({"ps", 0}, 0), "[ps-0 r0] ");
}

TEST(LogLinesTest, SplitsTheApiServersTimestamp) {
  TimedLine t = SplitTimestamp("2026-11-22T07:55:00.123456789Z step 10 loss 0.5");
  ASSERT_TRUE(t.unix_micros.has_value());
  EXPECT_EQ(t.text, "step 10 loss 0.5");
  TimedLine plain = SplitTimestamp("kubetrain: error: unknown model");
  EXPECT_FALSE(plain.unix_micros.has_value());
  EXPECT_EQ(plain.text, "kubetrain: error: unknown model");
  EXPECT_FALSE(SplitTimestamp("2026-13-99Tbad text").unix_micros.has_value());
}

TEST(LogLinesTest, MergesByTimeKeepingEachLogsOrder) {
  std::string merged = MergeLogs({
      {"[chief-0 r0] ", "2026-11-22T07:55:01Z c1\n2026-11-22T07:55:03Z c2\ncontinued\n"},
      {"[worker-0 r1] ", "2026-11-22T07:55:02Z w1\r\n2026-11-22T07:55:03Z w2\n"},
      {"[ps-0 r0] ", ""},
  });
  EXPECT_EQ(merged,
            "[chief-0 r0] c1\n"
            "[worker-0 r1] w1\n"
            "[chief-0 r0] c2\n"
            "[chief-0 r0] continued\n"
            "[worker-0 r1] w2\n");
}

TEST(ReplicaRefTest, ParsesNamesAndReadsPods) {
  EXPECT_EQ(*ParseReplicaName("Worker-3"), (ReplicaRef{"worker", 3}));
  EXPECT_FALSE(ParseReplicaName("worker").ok());
  EXPECT_FALSE(ParseReplicaName("gpu-1").ok());
  EXPECT_FALSE(ParseReplicaName("ps--1").ok());
  EXPECT_TRUE(ReplicaRef({"chief", 0}) < ReplicaRef({"ps", 0}));
  EXPECT_TRUE(ReplicaRef({"worker", 2}) < ReplicaRef({"worker", 10}));

  std::optional<PodView> view =
      ViewOfPod(ReplicaPod("fmnist", "worker", 2, "uid-1", 3, "running"), "");
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(view->replica, (ReplicaRef{"worker", 2}));
  EXPECT_EQ(view->pod, "fmnist-worker-2");
  EXPECT_EQ(view->container, "kubetrain");
  EXPECT_EQ(view->restarts, 3);
  EXPECT_TRUE(view->running);
  EXPECT_FALSE(ViewOfPod({{"metadata", {{"name", "other"}}}}, "").has_value());
  EXPECT_EQ(JobPodSelector("fmnist"), "kubetrain.io/job-name=fmnist");
}

TEST(ClusterReaderPathsTest, LogAndMetricsProxyPaths) {
  LogRequest request;
  request.container = "kubetrain";
  request.follow = true;
  request.since_unix_micros = 1700000000123456;
  EXPECT_EQ(PodLogPath("ns", "p", request),
            "/api/v1/namespaces/ns/pods/p/log?container=kubetrain&follow=true&timestamps=true&"
            "sinceTime=2023-11-14T22%3A13%3A20Z");
  nlohmann::json pod = ReplicaPod("fmnist", "worker", 0, "u", 0, "running");
  EXPECT_EQ(PodMetricsProxyPath(pod),
            "/api/v1/namespaces/ns/pods/fmnist-worker-0:8090/proxy/metrics");
  pod["metadata"]["annotations"] = {{"prometheus.io/port", "9100"}, {"prometheus.io/path", "/m"}};
  EXPECT_EQ(PodMetricsProxyPath(pod), "/api/v1/namespaces/ns/pods/fmnist-worker-0:9100/proxy/m");
}

}  // namespace
}  // namespace kubetrain::kubectl_plugin
