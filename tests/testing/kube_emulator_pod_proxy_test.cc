// pods/log and pods/proxy through the emulator: forwarded to a fake kubelet
// (the node agent's HTTPS server with a scripted handler) and a fake pod
// (a plain HTTP server), both on loopback.
#include "testing/kube_emulator_pod_proxy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <atomic>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "operator/kube/https_server.h"
#include "testing/kube_emulator.h"
#include "tests/support/kube_emulator_client.h"
#include "tests/support/self_signed_cert.h"
#include "tests/support/temp_files.h"
#include "tests/support/wait_for.h"

namespace kubetrain::testing {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

TEST(PreferredNodeAddressTest, FollowsTheApiServersDefaultOrder) {
  OrderedJson node = {{"metadata", {{"labels", {{"kubernetes.io/hostname", "n1"}}}}},
                      {"status",
                       {{"addresses",
                         {{{"type", "InternalIP"}, {"address", "10.0.0.2"}},
                          {{"type", "Hostname"}, {"address", "host-a"}}}}}}};
  EXPECT_EQ(*PreferredNodeAddress(node), "host-a");
  node["status"]["addresses"].erase(1);
  EXPECT_EQ(*PreferredNodeAddress(node), "n1") << "the hostname label stands in for Hostname";
  node["metadata"]["labels"] = OrderedJson::object();
  EXPECT_EQ(*PreferredNodeAddress(node), "10.0.0.2");
  node["status"]["addresses"] = OrderedJson::array();
  EXPECT_EQ(PreferredNodeAddress(node).status().code(), absl::StatusCode::kNotFound);
}

class PodProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<KubeEmulator>> emu = KubeEmulator::Start();
    ASSERT_TRUE(emu.ok()) << emu.status();
    emu_ = std::move(*emu);
    testing_util::WriteSelfSignedCert(dir_);
    kube::HttpsServerOptions o;
    o.cert_file = dir_.File("cert.pem");
    o.key_file = dir_.File("key.pem");
    auto kubelet =
        kube::HttpsServer::Start(o, [this](const kube::HttpsRequest& r, kube::HttpsReply& reply) {
          {
            absl::MutexLock lock(&mu_);
            seen_ = r;
          }
          if (r.query.count("previous")) {
            reply.Fail(400, "previous terminated container \"main\" in pod \"p\" not found");
            return;
          }
          reply.Write("line 1\n");
          if (r.query.count("follow") == 0) return;
          while (!release_.load()) {
            if (reply.Gone(absl::Milliseconds(10))) {
              client_left_ = true;
              return;
            }
          }
          reply.Write("line 2\n");
        });
    ASSERT_TRUE(kubelet.ok()) << kubelet.status();
    kubelet_ = std::move(*kubelet);
  }
  void TearDown() override {
    release_ = true;
    kubelet_.reset();
  }
  std::string U(const std::string& path) const { return emu_->Url() + path; }
  void CreateNode(int port) {
    const json node = {
        {"apiVersion", "v1"},
        {"kind", "Node"},
        {"metadata", {{"name", "n1"}, {"labels", {{"kubernetes.io/hostname", "n1"}}}}},
        {"status",
         {{"addresses",
           {{{"type", "InternalIP"}, {"address", "127.0.0.1"}},
            {{"type", "Hostname"}, {"address", "127.0.0.1"}}}},
          {"daemonEndpoints", {{"kubeletEndpoint", {{"Port", port}}}}}}}};
    ASSERT_EQ(Send("POST", U("/api/v1/nodes"), node.dump()).code, 201);
    // As the node agent does: the status through its subresource.
    ASSERT_EQ(Send("PATCH", U("/api/v1/nodes/n1/status"), json{{"status", node["status"]}}.dump(),
                   "application/merge-patch+json")
                  .code,
              200);
  }
  void CreatePod(const std::string& name, const std::string& node,
                 std::vector<std::string> containers = {"main"}) {
    json pod = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata", {{"name", name}}},
                {"spec", {{"containers", json::array()}}}};
    for (const std::string& c : containers) {
      pod["spec"]["containers"].push_back({{"name", c}, {"image", "kubetrain"}});
    }
    if (!node.empty()) pod["spec"]["nodeName"] = node;
    ASSERT_EQ(Send("POST", U("/api/v1/namespaces/default/pods"), pod.dump()).code, 201);
  }
  kube::HttpsRequest Seen() {
    absl::MutexLock lock(&mu_);
    return seen_;
  }

  data::testing_util::TempDir dir_;
  std::unique_ptr<KubeEmulator> emu_;
  std::unique_ptr<kube::HttpsServer> kubelet_;
  absl::Mutex mu_;
  kube::HttpsRequest seen_;
  std::atomic<bool> release_{false}, client_left_{false};
};

TEST_F(PodProxyTest, LogGoesToTheNodesKubeletWithTheContainerAndOptions) {
  CreateNode(kubelet_->port());
  CreatePod("p", "n1");
  HttpReply r = Get(U("/api/v1/namespaces/default/pods/p/log?tailLines=5&limitBytes=100"));
  EXPECT_EQ(r.code, 200) << r.body;
  EXPECT_EQ(r.body, "line 1\n");
  const kube::HttpsRequest seen = Seen();
  EXPECT_EQ(seen.path, "/containerLogs/default/p/main");  // the only container
  EXPECT_EQ(seen.query,
            (std::map<std::string, std::string>{{"limitBytes", "100"}, {"tailLines", "5"}}));
}

TEST_F(PodProxyTest, AKubeletErrorBecomesABadRequestStatusWithItsText) {
  CreateNode(kubelet_->port());
  CreatePod("p", "n1");
  HttpReply r = Get(U("/api/v1/namespaces/default/pods/p/log?previous=true"));
  EXPECT_EQ(r.code, 400);
  EXPECT_EQ(r.Json()["kind"], "Status");
  EXPECT_EQ(r.Json()["reason"], "BadRequest");
  EXPECT_EQ(r.Json()["message"], "previous terminated container \"main\" in pod \"p\" not found");
}

TEST_F(PodProxyTest, FollowStreamsUntilTheKubeletEndsAndNoticesAClientThatLeft) {
  CreateNode(kubelet_->port());
  CreatePod("p", "n1");
  {
    WatchStream follow(U("/api/v1/namespaces/default/pods/p/log?follow=true"));
    ASSERT_TRUE(follow.WaitForLines(1, absl::Seconds(10)));
    EXPECT_FALSE(follow.ended());
    release_ = true;
    ASSERT_TRUE(follow.WaitForEnd(absl::Seconds(10)));
    EXPECT_EQ(follow.Lines(), (std::vector<std::string>{"line 1", "line 2"}));
    EXPECT_TRUE(follow.clean_end());
  }
  release_ = false;
  {
    WatchStream follow(U("/api/v1/namespaces/default/pods/p/log?follow=true"));
    ASSERT_TRUE(follow.WaitForLines(1, absl::Seconds(10)));
  }  // the client hangs up: the emulator hangs up on the kubelet
  EXPECT_TRUE(testing_util::WaitFor([&] { return client_left_.load(); }));
}

TEST_F(PodProxyTest, KubernetesShapedErrors) {
  CreatePod("pending", "");
  CreatePod("two", "n1", {"a", "b"});
  CreatePod("lost", "n2");
  EXPECT_EQ(Get(U("/api/v1/namespaces/default/pods/nope/log")).code, 404);
  HttpReply pending = Get(U("/api/v1/namespaces/default/pods/pending/log"));
  EXPECT_EQ(pending.code, 400);
  EXPECT_THAT(pending.Json()["message"].get<std::string>(), HasSubstr("no node yet"));
  CreateNode(kubelet_->port());
  HttpReply two = Get(U("/api/v1/namespaces/default/pods/two/log"));
  EXPECT_EQ(two.code, 400);
  EXPECT_EQ(two.Json()["message"],
            "a container name must be specified for pod two, choose one of: [a b]");
  EXPECT_EQ(Get(U("/api/v1/namespaces/default/pods/two/log?container=c")).code, 400);
  EXPECT_EQ(Get(U("/api/v1/namespaces/default/pods/lost/log")).code, 503);
  const int port = kubelet_->port();
  kubelet_.reset();  // the kubelet is gone
  HttpReply down = Get(U("/api/v1/namespaces/default/pods/two/log?container=a"));
  EXPECT_EQ(down.code, 503);
  EXPECT_THAT(down.Json()["message"].get<std::string>(),
              HasSubstr(absl::StrCat("https://127.0.0.1:", port, "/containerLogs/default/two/a")));
}

TEST_F(PodProxyTest, ProxyGoesToThePodsAddressAndPort) {
  HttpRequest seen;
  absl::Mutex seen_mu;
  auto pod_server = EmulatorHttpServer::Start(0, [&](const HttpRequest& r, HttpConnection& c) {
    {
      absl::MutexLock lock(&seen_mu);
      seen = r;
    }
    const std::string body = "# TYPE kubetrain_step gauge\nkubetrain_step 7\n";
    c.Write(absl::StrCat("HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n",
                         "Content-Length: ", body.size(), "\r\n\r\n", body));
  });
  ASSERT_TRUE(pod_server.ok());
  CreatePod("p", "n1");
  HttpReply no_ip = Get(U("/api/v1/namespaces/default/pods/p:1/proxy/metrics"));
  EXPECT_EQ(no_ip.code, 503);
  ASSERT_EQ(Send("PATCH", U("/api/v1/namespaces/default/pods/p/status"),
                 R"({"status":{"podIP":"127.0.0.1"}})", "application/merge-patch+json")
                .code,
            200);
  const int port = (*pod_server)->port();
  HttpReply r =
      Get(U(absl::StrCat("/api/v1/namespaces/default/pods/p:", port, "/proxy/metrics?x=1")));
  EXPECT_EQ(r.code, 200) << r.body;
  EXPECT_EQ(r.body, "# TYPE kubetrain_step gauge\nkubetrain_step 7\n");
  EXPECT_EQ(r.headers["content-type"], "text/plain; version=0.0.4");
  {
    absl::MutexLock lock(&seen_mu);
    EXPECT_EQ(seen.path, "/metrics");
    EXPECT_EQ(seen.query.at("x"), "1");
  }
  pod_server->reset();  // the pod is gone
  HttpReply down =
      Get(U(absl::StrCat("/api/v1/namespaces/default/pods/p:", port, "/proxy/metrics")));
  EXPECT_EQ(down.code, 503);
  EXPECT_THAT(down.Json()["message"].get<std::string>(),
              HasSubstr("error trying to reach service"));
}

TEST_F(PodProxyTest, DiscoveryListsPodsLogForKubectl) {
  std::map<std::string, json> core;
  const json v1 = Get(U("/api/v1")).Json();
  for (const json& r : v1["resources"]) core[r["name"]] = r;
  EXPECT_EQ(core["pods/log"]["verbs"], json::array({"get"}));
  EXPECT_EQ(core["pods/log"]["kind"], "Pod");
  EXPECT_EQ(core["pods/proxy"]["kind"], "PodProxyOptions");
}

}  // namespace
}  // namespace kubetrain::testing
