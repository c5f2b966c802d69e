#include "testing/kube_emulator.h"

#include <functional>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/kube_emulator_client.h"

namespace kubetrain::testing {
namespace {

using json = nlohmann::json;

constexpr char kPods[] = "/api/v1/namespaces/default/pods";
constexpr char kJobs[] = "/apis/kubetrain.io/v1alpha1/namespaces/default/trainingjobs";

// Polls `cond` until it holds or `timeout` passes.
bool Eventually(const std::function<bool()>& cond, absl::Duration timeout = absl::Seconds(10)) {
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (cond()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return cond();
}

json PodBody(const std::string& name, const json& labels = json::object()) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"labels", labels}}},
          {"spec", {{"containers", {{{"name", "main"}, {"image", "busybox:1.36"}}}}}}};
}

// A TrainingJob the CRD's schema admits (a template with one container).
json JobBody(const std::string& name, int replicas = 1) {
  json worker = {{"replicas", replicas},
                 {"template",
                  {{"spec", {{"containers", {{{"name", "main"}, {"image", "kubetrain:test"}}}}}}}}};
  return {{"apiVersion", "kubetrain.io/v1alpha1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}}},
          {"spec", {{"replicaSpecs", {{"Worker", worker}}}}}};
}

class KubeEmulatorTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({}); }
  void Start(const KubeEmulatorOptions& options) {
    emu_.reset();
    absl::StatusOr<std::unique_ptr<KubeEmulator>> emu = KubeEmulator::Start(options);
    ASSERT_TRUE(emu.ok()) << emu.status();
    emu_ = *std::move(emu);
  }
  std::string U(const std::string& path) const { return emu_->Url() + path; }
  json Create(const std::string& path, const json& body, long want = 201) {
    HttpReply r = Send("POST", U(path), body.dump());
    EXPECT_EQ(r.code, want) << r.body;
    return r.Json();
  }
  long Code(const std::string& path) const { return Get(U(path)).code; }

  std::unique_ptr<KubeEmulator> emu_;
};

TEST_F(KubeEmulatorTest, CreateGetListDeletePod) {
  json pod = Create(kPods, PodBody("p1", {{"app", "a"}}));
  EXPECT_EQ(pod["status"]["phase"], "Pending");
  EXPECT_EQ(pod["status"]["qosClass"], "BestEffort");
  EXPECT_EQ(pod["spec"]["restartPolicy"], "Always");
  EXPECT_EQ(pod["spec"]["schedulerName"], "default-scheduler");
  EXPECT_EQ(pod["metadata"]["uid"].get<std::string>().size(), 36u);
  HttpReply got = Get(U(absl::StrCat(kPods, "/p1")));
  EXPECT_EQ(got.code, 200);
  EXPECT_EQ(got.Json(), pod);
  EXPECT_EQ(got.body.back(), '\n');
  json again = Create(kPods, PodBody("p1"), 409);
  EXPECT_EQ(again["reason"], "AlreadyExists");
  EXPECT_EQ(again["message"], "pods \"p1\" already exists");
  json missing = Get(U(absl::StrCat(kPods, "/nope"))).Json();
  EXPECT_EQ(missing["message"], "pods \"nope\" not found");
  json list = Get(U("/api/v1/pods?labelSelector=app%3Da")).Json();
  ASSERT_EQ(list["items"].size(), 1u);
  EXPECT_EQ(list["kind"], "PodList");
  EXPECT_EQ(list["metadata"]["resourceVersion"], std::to_string(emu_->ResourceVersion()));
  HttpReply del = Send("DELETE", U(absl::StrCat(kPods, "/p1")), "");
  EXPECT_EQ(del.code, 200);
  EXPECT_TRUE(del.Json()["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(Code(absl::StrCat(kPods, "/p1")), 404);
  EXPECT_EQ(Create("/api/v1/namespaces/nope/pods", PodBody("x"), 404)["message"],
            "namespaces \"nope\" not found");
  EXPECT_EQ(Get(U("/api/v1/namespaces/nope/pods")).Json()["items"], json::array());
}

TEST_F(KubeEmulatorTest, GenerateNameInvalidNameAndResourceVersionOnCreate) {
  json p = PodBody("");
  p["metadata"].erase("name");
  p["metadata"]["generateName"] = "train-";
  json pod = Create(kPods, p);
  EXPECT_EQ(pod["metadata"]["name"].get<std::string>().size(), 11u);
  json bad = Create(kPods, PodBody("Bad_Name"), 422);
  EXPECT_EQ(bad["details"]["causes"][0]["field"], "metadata.name");
  json rv = PodBody("z");
  rv["metadata"]["resourceVersion"] = "5";
  json err = Create(kPods, rv, 500);
  EXPECT_FALSE(err.contains("reason"));
}

TEST_F(KubeEmulatorTest, CustomResourceGenerationStatusAndConflicts) {
  json tj = Create(kJobs, JobBody("tj"));
  EXPECT_EQ(tj["metadata"]["generation"], 1);
  std::string url = U(absl::StrCat(kJobs, "/tj"));
  // PUT without resourceVersion: 422 for custom resources.
  json no_rv = tj;
  no_rv["metadata"].erase("resourceVersion");
  EXPECT_EQ(Send("PUT", url, no_rv.dump()).code, 422);
  // Spec change bumps generation; status on the main resource is ignored.
  json put = tj;
  put["spec"]["replicaSpecs"]["Worker"]["replicas"] = 2;
  put["status"] = {{"restartCount", 7}};
  HttpReply r = Send("PUT", url, put.dump());
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_EQ(r.Json()["metadata"]["generation"], 2);
  EXPECT_FALSE(r.Json().contains("status"));
  // Stale resourceVersion: 409 with the real message.
  HttpReply stale = Send("PUT", url, put.dump());
  EXPECT_EQ(stale.code, 409);
  EXPECT_EQ(stale.Json()["message"],
            "Operation cannot be fulfilled on trainingjobs.kubetrain.io \"tj\": the object has "
            "been modified; please apply your changes to the latest version and try again");
  // /status changes only status and keeps generation.
  HttpReply st =
      Send("PATCH", url + "/status",
           R"({"status":{"restartCount":1},"spec":{"replicaSpecs":{"Worker":{"replicas":9}}}})",
           "application/merge-patch+json");
  ASSERT_EQ(st.code, 200) << st.body;
  EXPECT_EQ(st.Json()["status"]["restartCount"], 1);
  EXPECT_EQ(st.Json()["spec"]["replicaSpecs"]["Worker"]["replicas"], 2);
  EXPECT_EQ(st.Json()["metadata"]["generation"], 2);
  // Identical write: no new resourceVersion.
  int64_t rv = emu_->ResourceVersion();
  EXPECT_EQ(Send("PATCH", url, "{}", "application/merge-patch+json").code, 200);
  EXPECT_EQ(emu_->ResourceVersion(), rv);
  EXPECT_EQ(Send("PATCH", url, "{}", "application/strategic-merge-patch+json").code, 415);
  EXPECT_EQ(Create(kJobs, JobBody("bad", -1), 422)["details"]["kind"], "TrainingJob");
  // The schema (crds/) applies to /status too: a status the real server
  // refuses is refused here (more cases: tests/support/structural_schema_test).
  HttpReply bad_status = Send("PATCH", url + "/status", R"({"status":{"restartCount":"x"}})",
                              "application/merge-patch+json");
  EXPECT_EQ(bad_status.code, 422) << bad_status.body;
  EXPECT_EQ(bad_status.Json()["details"]["causes"][0]["field"], "status.restartCount");
}

// Volcano's PodGroup CRD (tests/support/crds/) has a schema and no status
// subresource; a real kube-apiserver v1.20 answered these the same way.
// The CRD's scale subresource (crds/kubetrain.io_trainingjobs.yaml): an
// autoscaling/v1 Scale over spec.replicaSpecs.Worker.replicas,
// status.replicaStatuses.Worker.active and .selector, as kube-apiserver
// v1.20 serves it.
TEST_F(KubeEmulatorTest, ServesTheTrainingJobScaleSubresource) {
  json tj = Create(kJobs, JobBody("tj", 2));
  const std::string url = U(absl::StrCat(kJobs, "/tj"));
  HttpReply got = Get(url + "/scale");
  ASSERT_EQ(got.code, 200) << got.body;
  json scale = got.Json();
  EXPECT_EQ(scale["kind"], "Scale");
  EXPECT_EQ(scale["apiVersion"], "autoscaling/v1");
  EXPECT_EQ(scale["metadata"]["name"], "tj");
  EXPECT_EQ(scale["metadata"]["namespace"], "default");
  EXPECT_EQ(scale["metadata"]["uid"], tj["metadata"]["uid"]);
  EXPECT_EQ(scale["metadata"]["resourceVersion"], tj["metadata"]["resourceVersion"]);
  EXPECT_EQ(scale["spec"], json::parse(R"({"replicas":2})"));
  EXPECT_EQ(scale["status"], json::parse(R"({"replicas":0})"));  // no status yet

  // The operator's status fills status.replicas and the selector (an HPA's).
  HttpReply st = Send("PATCH", url + "/status",
                      R"({"status":{"replicaStatuses":{"Worker":{"active":2,
                          "selector":"kubetrain.io/job-name=tj,kubetrain.io/replica-type=worker"}}}})",
                      "application/merge-patch+json");
  ASSERT_EQ(st.code, 200) << st.body;
  scale = Get(url + "/scale").Json();
  EXPECT_EQ(scale["status"], json::parse(R"({"replicas":2,
                "selector":"kubetrain.io/job-name=tj,kubetrain.io/replica-type=worker"})"));

  // kubectl scale --replicas=4: a merge patch of the Scale.
  HttpReply patched =
      Send("PATCH", url + "/scale", R"({"spec":{"replicas":4}})", "application/merge-patch+json");
  ASSERT_EQ(patched.code, 200) << patched.body;
  EXPECT_EQ(patched.Json()["spec"]["replicas"], 4);
  json job = Get(url).Json();
  EXPECT_EQ(job["spec"]["replicaSpecs"]["Worker"]["replicas"], 4);
  EXPECT_EQ(job["metadata"]["generation"], 2);                         // a spec change
  EXPECT_EQ(job["status"]["replicaStatuses"]["Worker"]["active"], 2);  // status kept
  // A strategic merge patch and a JSON patch of the Scale work too.
  ASSERT_EQ(Send("PATCH", url + "/scale", R"({"spec":{"replicas":3}})",
                 "application/strategic-merge-patch+json")
                .code,
            200);
  HttpReply jp =
      Send("PATCH", url + "/scale", R"([{"op":"replace","path":"/spec/replicas","value":5}])",
           "application/json-patch+json");
  ASSERT_EQ(jp.code, 200) << jp.body;
  EXPECT_EQ(Get(url).Json()["spec"]["replicaSpecs"]["Worker"]["replicas"], 5);

  // PUT of a Scale: its resourceVersion is a precondition.
  json put = Get(url + "/scale").Json();
  put["spec"]["replicas"] = 1;
  HttpReply ok = Send("PUT", url + "/scale", put.dump());
  ASSERT_EQ(ok.code, 200) << ok.body;
  EXPECT_EQ(ok.Json()["spec"]["replicas"], 1);
  EXPECT_NE(ok.Json()["metadata"]["resourceVersion"], put["metadata"]["resourceVersion"]);
  put["spec"]["replicas"] = 6;
  HttpReply stale = Send("PUT", url + "/scale", put.dump());
  EXPECT_EQ(stale.code, 409) << stale.body;
  EXPECT_EQ(Get(url).Json()["spec"]["replicaSpecs"]["Worker"]["replicas"], 1);
  // Zero is a count (spec.replicas omitted as autoscaling/v1 omits it).
  put = Get(url + "/scale").Json();
  put["spec"]["replicas"] = 0;
  HttpReply zero = Send("PUT", url + "/scale", put.dump());
  ASSERT_EQ(zero.code, 200) << zero.body;
  EXPECT_EQ(zero.Json()["spec"], json::object());
  // Negative: refused as the Scale's validation refuses it.
  HttpReply negative =
      Send("PATCH", url + "/scale", R"({"spec":{"replicas":-1}})", "application/merge-patch+json");
  EXPECT_EQ(negative.code, 422);
  EXPECT_EQ(negative.Json()["message"],
            "Scale.autoscaling \"tj\" is invalid: spec.replicas: Invalid value: -1: must be "
            "greater than or equal to 0");
  EXPECT_EQ(negative.Json()["details"]["kind"], "Scale");
  // Missing job, other verbs.
  EXPECT_EQ(Get(U(absl::StrCat(kJobs, "/nope/scale"))).code, 404);
  EXPECT_EQ(Send("DELETE", url + "/scale", "").code, 405);
  EXPECT_EQ(Send("PATCH", url + "/scale", "{}", "application/apply-patch+yaml").code, 415);
  // Pods have no scale subresource here.
  Create(kPods, PodBody("p"));
  EXPECT_EQ(Get(U(absl::StrCat(kPods, "/p/scale"))).code, 404);
}

TEST_F(KubeEmulatorTest, PodGroupsFollowVolcanosCrd) {
  constexpr char kGroups[] = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups";
  json group = {{"apiVersion", "scheduling.volcano.sh/v1beta1"},
                {"kind", "PodGroup"},
                {"metadata", {{"name", "pg"}}},
                {"spec", {{"minMember", 3}, {"extra", 1}}},
                {"status", {{"phase", "Pending"}, {"bogus", 2}}}};
  json created = Create(kGroups, group);
  EXPECT_EQ(created["spec"], json({{"minMember", 3}}));        // unknown field pruned
  EXPECT_EQ(created["status"], json({{"phase", "Pending"}}));  // kept: no status subresource
  HttpReply status = Send("PATCH", U(absl::StrCat(kGroups, "/pg/status")),
                          R"({"status":{"phase":"Running"}})", "application/merge-patch+json");
  EXPECT_EQ(status.code, 404);
  EXPECT_EQ(status.Json()["message"], "podgroups.scheduling.volcano.sh \"pg\" not found");
  HttpReply patched = Send("PATCH", U(absl::StrCat(kGroups, "/pg")),
                           R"({"status":{"phase":"Running"}})", "application/merge-patch+json");
  ASSERT_EQ(patched.code, 200) << patched.body;
  EXPECT_EQ(patched.Json()["status"]["phase"], "Running");
  EXPECT_EQ(patched.Json()["metadata"]["generation"], 2);  // status is no subresource here
  group["metadata"]["name"] = "bad";
  group["spec"]["minMember"] = "x";
  json bad = Create(kGroups, group, 422);
  EXPECT_EQ(bad["details"]["causes"][0]["field"], "spec.minMember");
  EXPECT_EQ(
      bad["details"]["causes"][0]["message"],
      "Invalid value: \"string\": spec.minMember in body must be of type integer: \"string\"");
}

TEST_F(KubeEmulatorTest, PaginationWithContinueTokens) {
  for (const char* n : {"c", "a", "b"}) Create(kPods, PodBody(n));
  json page = Get(U(absl::StrCat(kPods, "?limit=2"))).Json();
  ASSERT_EQ(page["items"].size(), 2u);
  EXPECT_EQ(page["items"][0]["metadata"]["name"], "a");
  EXPECT_EQ(page["metadata"]["remainingItemCount"], 1);
  std::string token = page["metadata"]["continue"];
  json last = Get(U(absl::StrCat(kPods, "?limit=2&continue=", token))).Json();
  ASSERT_EQ(last["items"].size(), 1u);
  EXPECT_EQ(last["items"][0]["metadata"]["name"], "c");
  EXPECT_FALSE(last["metadata"].contains("continue"));
  EXPECT_EQ(last["metadata"]["resourceVersion"], page["metadata"]["resourceVersion"]);
  emu_->Compact();
  HttpReply expired = Get(U(absl::StrCat(kPods, "?limit=2&continue=", token)));
  EXPECT_EQ(expired.code, 410);
  EXPECT_EQ(expired.Json()["reason"], "Expired");
  EXPECT_EQ(
      Get(U(absl::StrCat(kPods, "?fieldSelector=status.phase%3DPending"))).Json()["items"].size(),
      3u);
  EXPECT_EQ(Get(U(absl::StrCat(kPods, "?fieldSelector=spec.image%3Dx"))).code, 400);
}

TEST_F(KubeEmulatorTest, WatchReplaySelectorsAndTimeout) {
  std::string rv = std::to_string(emu_->ResourceVersion());
  Create(kPods, PodBody("w1", {{"app", "w"}}));
  WatchStream watch(U(absl::StrCat(kPods, "?watch=1&labelSelector=app%3Dw&resourceVersion=", rv)));
  ASSERT_TRUE(watch.WaitForLines(1, absl::Seconds(10)));
  EXPECT_EQ(watch.Events()[0]["type"], "ADDED");
  ASSERT_EQ(Send("PATCH", U(absl::StrCat(kPods, "/w1")), R"({"metadata":{"labels":{"app":"x"}}})",
                 "application/merge-patch+json")
                .code,
            200);
  ASSERT_TRUE(watch.WaitForLines(2, absl::Seconds(10)));
  json left = watch.Events()[1];
  EXPECT_EQ(left["type"], "DELETED");  // left the selector: old labels, new resourceVersion
  EXPECT_EQ(left["object"]["metadata"]["labels"]["app"], "w");
  EXPECT_EQ(left["object"]["metadata"]["resourceVersion"], std::to_string(emu_->ResourceVersion()));
  EXPECT_EQ(emu_->OpenWatches(), 1);
  watch.Stop();
  EXPECT_TRUE(Eventually([&] { return emu_->OpenWatches() == 0; }));

  WatchStream timed(U(absl::StrCat(kPods, "?watch=1&timeoutSeconds=1")));
  ASSERT_TRUE(timed.WaitForEnd(absl::Seconds(10)));
  EXPECT_TRUE(timed.clean_end());
  ASSERT_EQ(timed.Events().size(), 1u);  // current state as ADDED, then a clean end
}

TEST_F(KubeEmulatorTest, WatchTooOldBookmarksAndDrop) {
  KubeEmulatorOptions options;
  options.bookmark_interval = absl::Milliseconds(100);
  Start(options);
  std::string rv = std::to_string(emu_->ResourceVersion());
  Create(kPods, PodBody("b1"));
  emu_->Compact();
  WatchStream old(U(absl::StrCat(kPods, "?watch=1&resourceVersion=", rv)));
  ASSERT_TRUE(old.WaitForEnd(absl::Seconds(10)));
  EXPECT_EQ(old.code(), 200);
  ASSERT_EQ(old.Events().size(), 1u);
  EXPECT_EQ(old.Events()[0]["type"], "ERROR");
  EXPECT_EQ(old.Events()[0]["object"]["code"], 410);
  EXPECT_EQ(Get(U(absl::StrCat(kPods, "?resourceVersionMatch=Exact&resourceVersion=", rv))).code,
            410);

  Create(kPods, PodBody("b2"));  // a resourceVersion after the compaction
  std::string now = std::to_string(emu_->ResourceVersion());
  WatchStream bm(U(absl::StrCat(kPods, "?watch=1&allowWatchBookmarks=true&resourceVersion=", now)));
  ASSERT_TRUE(bm.WaitForLines(1, absl::Seconds(10)));
  json b = bm.Events()[0];
  EXPECT_EQ(b["type"], "BOOKMARK");
  EXPECT_EQ(b["object"]["metadata"]["resourceVersion"], now);
  EXPECT_TRUE(b["object"]["spec"]["containers"].is_null());
  emu_->DropWatches();
  ASSERT_TRUE(bm.WaitForEnd(absl::Seconds(10)));
  EXPECT_FALSE(bm.clean_end());  // cut, not a clean end of stream
}

TEST_F(KubeEmulatorTest, GarbageCollection) {
  json bg = Create(kJobs, JobBody("bg"));
  json fg = Create(kJobs, JobBody("fg"));
  json orphan = Create(kJobs, JobBody("or"));
  auto owned = [](const std::string& name, const json& owner) {
    json p = PodBody(name);
    p["metadata"]["ownerReferences"] = {{{"apiVersion", "kubetrain.io/v1alpha1"},
                                         {"kind", "TrainingJob"},
                                         {"name", owner["metadata"]["name"]},
                                         {"uid", owner["metadata"]["uid"]},
                                         {"controller", true},
                                         {"blockOwnerDeletion", true}}};
    return p;
  };
  Create(kPods, owned("bg-pod", bg));
  Create(kPods, owned("fg-pod", fg));
  Create(kPods, owned("or-pod", orphan));
  json dangling = owned("dangling", bg);
  dangling["metadata"]["ownerReferences"][0]["uid"] = "00000000-0000-4000-8000-000000000000";
  Create(kPods, dangling);

  HttpReply d1 = Send("DELETE", U(absl::StrCat(kJobs, "/bg")), "");
  EXPECT_EQ(d1.Json()["status"], "Success");
  EXPECT_EQ(d1.Json()["details"]["uid"], bg["metadata"]["uid"]);
  EXPECT_TRUE(Eventually([&] { return Code(absl::StrCat(kPods, "/bg-pod")) == 404; }));
  EXPECT_TRUE(Eventually([&] { return Code(absl::StrCat(kPods, "/dangling")) == 404; }));

  HttpReply d2 = Send("DELETE", U(absl::StrCat(kJobs, "/fg?propagationPolicy=Foreground")), "");
  EXPECT_EQ(d2.Json()["metadata"]["finalizers"], json::array({"foregroundDeletion"}));
  EXPECT_EQ(d2.Json()["metadata"]["generation"], 2);
  EXPECT_TRUE(Eventually([&] { return Code(absl::StrCat(kPods, "/fg-pod")) == 404; }));
  EXPECT_TRUE(Eventually([&] { return Code(absl::StrCat(kJobs, "/fg")) == 404; }));

  HttpReply d3 = Send("DELETE", U(absl::StrCat(kJobs, "/or")), R"({"propagationPolicy":"Orphan"})");
  EXPECT_EQ(d3.Json()["metadata"]["finalizers"], json::array({"orphan"}));
  EXPECT_TRUE(Eventually([&] { return Code(absl::StrCat(kJobs, "/or")) == 404; }));
  json kept = Get(U(absl::StrCat(kPods, "/or-pod"))).Json();
  EXPECT_FALSE(kept["metadata"].contains("ownerReferences"));

  // A custom finalizer blocks removal until an update clears it.
  json fin = JobBody("fin");
  fin["metadata"]["finalizers"] = {"example.com/hold"};
  Create(kJobs, fin);
  EXPECT_EQ(Send("DELETE", U(absl::StrCat(kJobs, "/fin")), "").code, 200);
  EXPECT_EQ(Code(absl::StrCat(kJobs, "/fin")), 200);
  EXPECT_EQ(Send("PATCH", U(absl::StrCat(kJobs, "/fin")), R"({"metadata":{"finalizers":null}})",
                 "application/merge-patch+json")
                .code,
            200);
  EXPECT_EQ(Code(absl::StrCat(kJobs, "/fin")), 404);
}

TEST_F(KubeEmulatorTest, FaultsDelayAndRequestCounts) {
  emu_->InjectFault({.method = "GET",
                     .path_substring = "/pods",
                     .watch_only = false,
                     .http_code = 429,
                     .count = 2,
                     .retry_after_seconds = 3});
  for (int i = 0; i < 2; ++i) {
    HttpReply r = Get(U(kPods));
    EXPECT_EQ(r.code, 429);
    EXPECT_EQ(r.Json()["reason"], "TooManyRequests");
    EXPECT_EQ(r.Json()["details"]["retryAfterSeconds"], 3);
    EXPECT_EQ(r.headers["retry-after"], "3");
  }
  EXPECT_EQ(Get(U(kPods)).code, 200);
  EXPECT_EQ(emu_->RequestCount("GET", "/pods"), 3);
  emu_->InjectFault({.method = "",
                     .path_substring = "",
                     .watch_only = true,
                     .http_code = 500,
                     .count = 1,
                     .retry_after_seconds = 0});
  EXPECT_EQ(Get(U(kPods)).code, 200);
  EXPECT_EQ(Get(U(absl::StrCat(kPods, "?watch=1"))).code, 500);
  emu_->InjectFault({.method = "",
                     .path_substring = "",
                     .watch_only = false,
                     .http_code = 503,
                     .count = 5,
                     .retry_after_seconds = 0});
  emu_->ClearFaults();
  emu_->SetResponseDelay(absl::Milliseconds(200));
  absl::Time start = absl::Now();
  EXPECT_EQ(Get(U(kPods)).code, 200);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
}

TEST_F(KubeEmulatorTest, TokenAuthentication) {
  KubeEmulatorOptions options;
  options.token = "secret";
  Start(options);
  HttpReply anon = Get(U(kPods));
  EXPECT_EQ(anon.code, 403);
  EXPECT_EQ(anon.Json()["message"],
            "pods is forbidden: User \"system:anonymous\" cannot list resource \"pods\" in API "
            "group \"\" in the namespace \"default\"");
  HttpCall bad;
  bad.url = U(kPods);
  bad.headers = {"Authorization: Bearer wrong"};
  EXPECT_EQ(Fetch(bad).code, 401);
  HttpCall good = bad;
  good.headers = {"Authorization: Bearer secret"};
  EXPECT_EQ(Fetch(good).code, 200);
}

TEST_F(KubeEmulatorTest, LeasesServicesNamespaces) {
  const std::string leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
  json lease = Create(
      leases, {{"apiVersion", "coordination.k8s.io/v1"},
               {"kind", "Lease"},
               {"metadata", {{"name", "leader"}}},
               {"spec", {{"holderIdentity", "a"}, {"renewTime", "2026-01-02T03:04:05.123456Z"}}}});
  json bad = lease;
  bad["spec"]["renewTime"] = "2026-01-02T03:04:05Z";
  EXPECT_EQ(Send("PUT", U(leases + "/leader"), bad.dump()).code, 400);
  json svc = Create("/api/v1/namespaces/default/services",
                    {{"apiVersion", "v1"},
                     {"kind", "Service"},
                     {"metadata", {{"name", "tj-worker-0"}}},
                     {"spec", {{"clusterIP", "None"}, {"ports", {{{"port", 2222}}}}}}});
  EXPECT_EQ(svc["spec"]["ports"][0]["targetPort"], 2222);
  Create("/api/v1/namespaces",
         {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "gone"}}}});
  Create("/api/v1/namespaces/gone/pods", PodBody("p"));
  EXPECT_EQ(Send("DELETE", U("/api/v1/namespaces/gone"), "").Json()["status"]["phase"],
            "Terminating");
  EXPECT_TRUE(Eventually([&] { return Code("/api/v1/namespaces/gone") == 404; }));
  EXPECT_EQ(Code("/api/v1/namespaces/gone/pods/p"), 404);
}

// What kubectl reads before it touches a resource, as kube-apiserver v1.20
// answers it (recorded with kubectl 1.31 -v=8 against a real one).
TEST_F(KubeEmulatorTest, ServesDiscoveryForKubectl) {
  json api = Get(U("/api")).Json();
  EXPECT_EQ(api["kind"], "APIVersions");
  EXPECT_EQ(api["versions"], json::array({"v1"}));
  json groups = Get(U("/apis")).Json();
  EXPECT_EQ(groups["kind"], "APIGroupList");
  bool kubetrain = false;
  for (const json& g : groups["groups"]) {
    if (g["name"] == "kubetrain.io") {
      kubetrain = true;
      EXPECT_EQ(g["preferredVersion"]["groupVersion"], "kubetrain.io/v1alpha1");
    }
  }
  EXPECT_TRUE(kubetrain) << groups.dump();
  json tj = Get(U("/apis/kubetrain.io/v1alpha1")).Json();
  EXPECT_EQ(tj["kind"], "APIResourceList");
  EXPECT_EQ(tj["groupVersion"], "kubetrain.io/v1alpha1");
  ASSERT_EQ(tj["resources"].size(), 3u);
  EXPECT_EQ(tj["resources"][0]["name"], "trainingjobs");
  EXPECT_EQ(tj["resources"][0]["singularName"], "trainingjob");
  EXPECT_EQ(tj["resources"][0]["shortNames"], json::array({"tj"}));  // from the CRD
  EXPECT_EQ(tj["resources"][0]["kind"], "TrainingJob");
  EXPECT_EQ(tj["resources"][1]["name"], "trainingjobs/status");
  // The CRD's scale subresource, as kube-apiserver lists it (what kubectl
  // scale looks for).
  EXPECT_EQ(tj["resources"][2],
            json::parse(R"({"name":"trainingjobs/scale","singularName":"","namespaced":true,
                            "group":"autoscaling","version":"v1","kind":"Scale",
                            "verbs":["get","patch","update"]})"));
  std::map<std::string, json> core;
  const json v1 = Get(U("/api/v1")).Json();
  for (const json& r : v1["resources"]) core[r["name"]] = r;
  EXPECT_EQ(core["pods"]["shortNames"], json::array({"po"}));
  EXPECT_EQ(core["nodes"]["namespaced"], false);
  EXPECT_EQ(core["pods/binding"]["verbs"], json::array({"create"}));
  // A minimal OpenAPI v3 that declares fieldValidation on each PATCH, so
  // kubectl leaves validation to the server; no OpenAPI v2.
  json v3 = Get(U("/openapi/v3")).Json();
  const std::string url =
      v3["paths"]["apis/kubetrain.io/v1alpha1"]["serverRelativeURL"].get<std::string>();
  json doc = Get(U(url)).Json();
  json patch =
      doc["paths"]["/apis/kubetrain.io/v1alpha1/namespaces/{namespace}/trainingjobs/{name}"]
         ["patch"];
  EXPECT_EQ(patch["parameters"][0]["name"], "fieldValidation");
  EXPECT_EQ(patch["x-kubernetes-group-version-kind"]["kind"], "TrainingJob");
  EXPECT_EQ(Code("/openapi/v2"), 404);
}

TEST_F(KubeEmulatorTest, AnswersTablesWithTheCrdsPrinterColumns) {
  Create(kJobs, JobBody("tj1"));
  json status = {{"status",
                  {{"progress", {{"step", 12}, {"loss", 0.5}, {"accuracy", 0.75}}},
                   {"worldSize", 3},
                   {"generation", 2},
                   {"conditions",
                    {{{"type", "Created"},
                      {"status", "True"},
                      {"lastTransitionTime", "2026-01-01T00:00:00Z"},
                      {"lastUpdateTime", "2026-01-01T00:00:00Z"}},
                     {{"type", "Running"},
                      {"status", "True"},
                      {"lastTransitionTime", "2026-01-01T00:00:00Z"},
                      {"lastUpdateTime", "2026-01-01T00:00:00Z"}}}}}}};
  ASSERT_EQ(Send("PATCH", U(absl::StrCat(kJobs, "/tj1/status")), status.dump(),
                 "application/merge-patch+json")
                .code,
            200);
  HttpCall call;
  call.url = U(kJobs);
  call.headers = {
      "Accept: application/json;as=Table;v=v1;g=meta.k8s.io,application/"
      "json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"};
  json table = Fetch(call).Json();
  EXPECT_EQ(table["kind"], "Table");
  EXPECT_EQ(table["apiVersion"], "meta.k8s.io/v1");
  std::vector<std::string> names;
  for (const json& c : table["columnDefinitions"]) names.push_back(c["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"Name", "Status", "Step", "Loss", "Accuracy", "World",
                                             "Generation", "Age"}));
  // Generation is a -o wide column (priority 1), as the CRD says.
  EXPECT_EQ(table["columnDefinitions"][6]["priority"], 1);
  ASSERT_EQ(table["rows"].size(), 1u);
  const json cells = table["rows"][0]["cells"];
  EXPECT_EQ(cells[0], "tj1");
  EXPECT_EQ(cells[1], "Running");  // .status.conditions[-1:].type
  EXPECT_EQ(cells[2], 12);
  EXPECT_EQ(cells[3], 0.5);
  EXPECT_EQ(cells[4], 0.75);
  EXPECT_EQ(cells[5], 3);  // .status.worldSize
  EXPECT_EQ(cells[6], 2);  // .status.generation
  EXPECT_TRUE(cells[7].is_string());
  EXPECT_EQ(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
  EXPECT_EQ(table["rows"][0]["object"]["metadata"]["name"], "tj1");
  // One object, and pods with their own columns.
  call.url = U(absl::StrCat(kJobs, "/tj1"));
  EXPECT_EQ(Fetch(call).Json()["rows"].size(), 1u);
  Create(kPods, PodBody("p1"));
  call.url = U(kPods);
  json pods = Fetch(call).Json();
  EXPECT_EQ(pods["columnDefinitions"][1]["name"], "Ready");
  EXPECT_EQ(pods["rows"][0]["cells"][1], "0/1");
  EXPECT_EQ(pods["rows"][0]["cells"][2], "Pending");
  EXPECT_EQ(pods["rows"][0]["cells"][6], "<none>");  // no node yet
  // Without the Accept header: the list as always.
  EXPECT_EQ(Get(U(kPods)).Json()["kind"], "PodList");
  // kubectl get -w: each watch event's object is a Table of that object.
  WatchStream watch(U(absl::StrCat(kJobs, "?watch=1")), call.headers);
  ASSERT_TRUE(watch.WaitForLines(1, absl::Seconds(10)));
  const json event = watch.Events()[0];
  EXPECT_EQ(event["type"], "ADDED");
  EXPECT_EQ(event["object"]["kind"], "Table");
  EXPECT_EQ(event["object"]["rows"][0]["cells"][2], 12);
}

TEST_F(KubeEmulatorTest, NodesAndPodBindingsForANodeAgent) {
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}};
  Create("/api/v1/nodes", node);
  ASSERT_EQ(Send("PATCH", U("/api/v1/nodes/n1/status"),
                 R"({"status":{"conditions":[{"type":"Ready","status":"True"}]}})",
                 "application/merge-patch+json")
                .code,
            200);
  EXPECT_EQ(Get(U("/api/v1/nodes/n1")).Json()["status"]["conditions"][0]["type"], "Ready");
  json pod = Create(kPods, PodBody("p1"));
  json binding = {{"apiVersion", "v1"},
                  {"kind", "Binding"},
                  {"metadata", {{"name", "p1"}, {"uid", pod["metadata"]["uid"]}}},
                  {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", "n1"}}}};
  json bound = Create(absl::StrCat(kPods, "/p1/binding"), binding, 201);
  EXPECT_EQ(bound["status"], "Success");
  EXPECT_EQ(Get(U(absl::StrCat(kPods, "/p1"))).Json()["spec"]["nodeName"], "n1");
  json again = Create(absl::StrCat(kPods, "/p1/binding"), binding, 409);
  EXPECT_EQ(again["message"],
            "Operation cannot be fulfilled on pods/binding \"p1\": pod p1 is already assigned to "
            "node \"n1\"");
  Create(kPods, PodBody("p2"));
  binding["metadata"] = {{"name", "p2"}, {"uid", "not-its-uid"}};
  EXPECT_EQ(Create(absl::StrCat(kPods, "/p2/binding"), binding, 409)["reason"], "Conflict");
  Create(absl::StrCat(kPods, "/nope/binding"), binding, 404);
}

}  // namespace
}  // namespace kubetrain::testing
