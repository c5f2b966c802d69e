#include "tools/node_agent/loopback_endpoints.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "api/cluster_spec.h"
#include "api/training_job.h"
#include "tests/tools/node_agent/fake_port_allocator.h"

namespace kubetrain::node_agent {
namespace {

using ::testing::Optional;
using ::testing::Pair;

api::TrainingJob Load(const std::string& name, int ps, int workers) {
  std::string text =
      absl::StrCat("apiVersion: kubetrain.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: ", name,
                   ", namespace: team}\nspec:\n  replicaSpecs:\n");
  const std::string tmpl = "      template: {spec: {containers: [{name: k, image: img}]}}\n";
  if (ps > 0) absl::StrAppend(&text, "    PS:\n      replicas: ", ps, "\n", tmpl);
  absl::StrAppend(&text, "    Worker:\n      replicas: ", workers, "\n", tmpl);
  absl::StatusOr<api::TrainingJob> job = api::LoadTrainingJob(text, "test.yaml");
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? *job : api::TrainingJob{};
}

std::string Get(const api::EnvList& env, const std::string& name) {
  std::string value;
  for (const auto& [k, v] : env) {
    if (k == name) value = v;
  }
  return value;
}

TEST(LoopbackEndpointsTest, ResolvesServiceHostsTheWayClusterDnsWould) {
  const ServiceNames services = {{"team", "job-ps-0"}, {"other", "db"}};
  // In-cluster forms, whether the Service exists yet or not.
  EXPECT_THAT(LoopbackEndpoints::ResolveHost("job-ps-0.team.svc", "x", {}),
              Optional(Pair("team", "job-ps-0")));
  EXPECT_THAT(LoopbackEndpoints::ResolveHost("job-ps-0.team.svc.cluster.local", "x", {}),
              Optional(Pair("team", "job-ps-0")));
  EXPECT_THAT(LoopbackEndpoints::ResolveHost("Job-PS-0.Team.SVC", "x", {}),
              Optional(Pair("team", "job-ps-0")));
  // serviceMode PerJob: <host>.<job>.<ns>.svc, keyed by the host.
  EXPECT_THAT(LoopbackEndpoints::ResolveHost("job-worker-1.job.team.svc.example.org", "x", {}),
              Optional(Pair("team", "job-worker-1")));
  // Short forms only for Services that exist.
  EXPECT_THAT(LoopbackEndpoints::ResolveHost("job-ps-0", "team", services),
              Optional(Pair("team", "job-ps-0")));
  EXPECT_EQ(LoopbackEndpoints::ResolveHost("job-ps-0", "other", services), std::nullopt);
  EXPECT_THAT(LoopbackEndpoints::ResolveHost("db.other", "team", services),
              Optional(Pair("other", "db")));
  EXPECT_EQ(LoopbackEndpoints::ResolveHost("example.com", "team", services), std::nullopt);
  EXPECT_EQ(LoopbackEndpoints::ResolveHost("10.0.0.7", "team", services), std::nullopt);
  EXPECT_EQ(LoopbackEndpoints::ResolveHost("svc", "team", services), std::nullopt);
  EXPECT_EQ(LoopbackEndpoints::ResolveHost("a.b.c.d.svc", "team", services), std::nullopt);
  EXPECT_EQ(LoopbackEndpoints::ResolveHost("job..svc", "team", services), std::nullopt);
}

TEST(LoopbackEndpointsTest, EachServicePortGetsOnePortOnceAndStably) {
  FakePortAllocator ports;
  LoopbackEndpoints endpoints(ports);
  absl::StatusOr<int> ps = endpoints.PortFor("team", "job-ps-0", 2222);
  absl::StatusOr<int> worker = endpoints.PortFor("team", "job-worker-0", 2222);
  absl::StatusOr<int> other_ns = endpoints.PortFor("other", "job-ps-0", 2222);
  absl::StatusOr<int> other_port = endpoints.PortFor("team", "job-ps-0", 2223);
  ASSERT_TRUE(ps.ok() && worker.ok() && other_ns.ok() && other_port.ok());
  EXPECT_EQ(std::set<int>({*ps, *worker, *other_ns, *other_port}).size(), 4u);
  EXPECT_EQ(endpoints.PortFor("team", "job-ps-0", 2222).value(), *ps);
  EXPECT_EQ(ports.calls, 4);
  EXPECT_EQ(endpoints.allocated().size(), 4u);
}

TEST(LoopbackEndpointsTest, RewritesTheOperatorsEnvironmentSoPeersMeetOnLoopback) {
  // The environment the operator gives worker 1 of a 1 PS + 2 worker job.
  const api::TrainingJob job = Load("fm", 1, 2);
  const api::ClusterSpec cluster = api::InClusterSpec(job);
  const api::EnvList env =
      api::ReplicaEnvironment(job, cluster, api::ReplicaType::kWorker, 1, "tok");
  ASSERT_EQ(cluster.hosts.at("ps")[0], "fm-ps-0.team.svc:2222");

  FakePortAllocator ports;
  LoopbackEndpoints endpoints(ports);
  absl::StatusOr<api::EnvList> out = endpoints.Rewrite("team", {}, env);
  ASSERT_TRUE(out.ok()) << out.status();
  const int ps = endpoints.PortFor("team", "fm-ps-0", 2222).value();
  const int w0 = endpoints.PortFor("team", "fm-worker-0", 2222).value();
  const int w1 = endpoints.PortFor("team", "fm-worker-1", 2222).value();
  absl::StatusOr<api::TfConfig> tf = api::ParseTfConfig(Get(*out, "TF_CONFIG"));
  ASSERT_TRUE(tf.ok()) << tf.status();
  EXPECT_EQ(tf->cluster.hosts.at("ps"), std::vector<std::string>{absl::StrCat("127.0.0.1:", ps)});
  EXPECT_EQ(
      tf->cluster.hosts.at("worker"),
      (std::vector<std::string>{absl::StrCat("127.0.0.1:", w0), absl::StrCat("127.0.0.1:", w1)}));
  EXPECT_EQ(tf->task_type, "worker");
  EXPECT_EQ(tf->task_index, 1);
  EXPECT_EQ(Get(*out, "KUBETRAIN_PS_HOSTS"), absl::StrCat("127.0.0.1:", ps));
  EXPECT_EQ(Get(*out, "KUBETRAIN_WORKER_HOSTS"), absl::StrCat("127.0.0.1:", w0, ",127.0.0.1:", w1));
  // Everything else as it was, in the same order.
  ASSERT_EQ(out->size(), env.size());
  for (size_t i = 0; i < env.size(); ++i) {
    EXPECT_EQ((*out)[i].first, env[i].first);
    if (env[i].first == "KUBETRAIN_JOB_TOKEN" || env[i].first == "KUBETRAIN_JOB_NAME") {
      EXPECT_EQ((*out)[i].second, env[i].second);
    }
  }
  // Another replica of the job sees the same ports.
  absl::StatusOr<api::EnvList> ps_env = endpoints.Rewrite(
      "team", {}, api::ReplicaEnvironment(job, cluster, api::ReplicaType::kPS, 0, "tok"));
  ASSERT_TRUE(ps_env.ok());
  EXPECT_EQ(Get(*ps_env, "KUBETRAIN_WORKER_HOSTS"), Get(*out, "KUBETRAIN_WORKER_HOSTS"));
  EXPECT_EQ(ports.calls, 3);
}

TEST(LoopbackEndpointsTest, RewritesMasterAddrAndPortTogether) {
  const api::TrainingJob job = Load("ar", 0, 2);
  const api::EnvList env =
      api::ReplicaEnvironment(job, api::InClusterSpec(job), api::ReplicaType::kWorker, 1, "");
  ASSERT_EQ(Get(env, "MASTER_ADDR"), "ar-worker-0.team.svc");
  FakePortAllocator ports;
  LoopbackEndpoints endpoints(ports);
  absl::StatusOr<api::EnvList> out = endpoints.Rewrite("team", {}, env);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(Get(*out, "MASTER_ADDR"), "127.0.0.1");
  EXPECT_EQ(Get(*out, "MASTER_PORT"),
            absl::StrCat(endpoints.PortFor("team", "ar-worker-0", 2222).value()));
  EXPECT_EQ(Get(*out, "WORLD_SIZE"), "2");
  EXPECT_EQ(Get(*out, "RANK"), "1");
}

TEST(LoopbackEndpointsTest, RewritesAUsersOwnVariablesAndLeavesOtherHostsAlone) {
  FakePortAllocator ports;
  LoopbackEndpoints endpoints(ports);
  const ServiceNames services = {{"team", "cache"}};
  absl::StatusOr<api::EnvList> out =
      endpoints.Rewrite("team", services,
                        {{"PEERS", "--ps=cache:6379 http://cache.team.svc:80/x"},
                         {"UPSTREAM", "example.com:443,10.1.2.3:2222,cache:99999,cache:80x"},
                         {"HOST_ONLY", "cache"},
                         {"TIME", "12:30"}});
  ASSERT_TRUE(out.ok());
  const int redis = endpoints.PortFor("team", "cache", 6379).value();
  const int http = endpoints.PortFor("team", "cache", 80).value();
  EXPECT_EQ(Get(*out, "PEERS"),
            absl::StrCat("--ps=127.0.0.1:", redis, " http://127.0.0.1:", http, "/x"));
  EXPECT_EQ(Get(*out, "UPSTREAM"), "example.com:443,10.1.2.3:2222,cache:99999,cache:80x");
  EXPECT_EQ(Get(*out, "HOST_ONLY"), "127.0.0.1");
  EXPECT_EQ(Get(*out, "TIME"), "12:30");
}

TEST(LoopbackEndpointsTest, NoPortLeftIsAnErrorNamingTheService) {
  FakePortAllocator ports;
  ports.left = 0;
  LoopbackEndpoints endpoints(ports);
  absl::StatusOr<api::EnvList> out =
      endpoints.Rewrite("team", {}, {{"TF_CONFIG", R"({"cluster":{"ps":["p.team.svc:2222"]}})"}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(out.status().message()), ::testing::HasSubstr("p.team:2222"));
}

}  // namespace
}  // namespace kubetrain::node_agent
