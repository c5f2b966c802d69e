// KubeClient against a server: the API emulator, or a real cluster when
// KUBETRAIN_TEST_KUBECONFIG is set.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "operator/kube/api_error.h"
#include "operator/kube/cpprest_transport.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/object.h"
#include "testing/kube_test_target.h"

namespace kubetrain::kube {
namespace {

using ::testing::HasSubstr;
using testing::KubeTestTarget;

Json PodSpec(const std::string& name, std::map<std::string, std::string> labels = {}) {
  Json pod{{"metadata", {{"name", name}}},
           {"spec", {{"containers", Json::array({{{"name", "c"}, {"image", "busybox"}}})}}}};
  if (!labels.empty()) pod["metadata"]["labels"] = labels;
  return pod;
}

class KubeClientServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<KubeTestTarget>> target = KubeTestTarget::Create();
    ASSERT_TRUE(target.ok()) << target.status();
    target_ = *std::move(target);
  }
  KubeClient& client() { return target_->client(); }
  const std::string& ns() { return target_->ns(); }
  std::unique_ptr<KubeTestTarget> target_;
};

TEST_F(KubeClientServerTest, CreateGetNotFoundAlreadyExists) {
  absl::StatusOr<Json> created = client().Create(kPods, ns(), PodSpec("a"));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_FALSE(Uid(*created).empty());
  EXPECT_FALSE(ResourceVersionOf(*created).empty());
  absl::StatusOr<Json> got = client().Get(kPods, ns(), "a");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Uid(*got), Uid(*created));

  absl::StatusOr<Json> again = client().Create(kPods, ns(), PodSpec("a"));
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(absl::IsAlreadyExists(again.status())) << again.status();
  EXPECT_THAT(std::string(again.status().message()), HasSubstr("pods \"a\" already exists"));

  absl::StatusOr<Json> missing = client().Get(kPods, ns(), "zz");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("pods \"zz\" not found"));

  absl::StatusOr<Json> bad = client().Create(kPods, ns(), PodSpec("Bad_Name"));
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(IsInvalid(bad.status())) << bad.status();
}

TEST_F(KubeClientServerTest, ConcurrentUpdatesOneConflict) {
  ASSERT_TRUE(client().Create(kPods, ns(), PodSpec("p")).ok());
  absl::StatusOr<std::unique_ptr<KubeClient>> other = target_->NewClient();
  ASSERT_TRUE(other.ok());
  absl::StatusOr<Json> mine = client().Get(kPods, ns(), "p");
  absl::StatusOr<Json> theirs = (*other)->Get(kPods, ns(), "p");
  ASSERT_TRUE(mine.ok() && theirs.ok());
  (*mine)["metadata"]["labels"]["writer"] = "me";
  (*theirs)["metadata"]["labels"]["writer"] = "them";
  absl::StatusOr<Json> first = client().Update(kPods, *mine);
  absl::StatusOr<Json> second = (*other)->Update(kPods, *theirs);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(IsConflict(second.status())) << second.status();
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("the object has been modified"));
  EXPECT_EQ(Label(*client().Get(kPods, ns(), "p"), "writer"), "me");

  // Many writers racing with read-modify-write: every increment lands once.
  Json counter{{"metadata", {{"name", "counter"}}}, {"data", {{"n", "0"}}}};
  ASSERT_TRUE(client().Create(kConfigMaps, ns(), counter).ok());
  std::vector<std::thread> writers;
  std::atomic<int> conflicts{0};
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&] {
      for (int i = 0; i < 5; ++i) {
        while (true) {
          absl::StatusOr<Json> cm = client().Get(kConfigMaps, ns(), "counter");
          ASSERT_TRUE(cm.ok());
          int n = std::stoi((*cm)["data"]["n"].get<std::string>());
          (*cm)["data"]["n"] = std::to_string(n + 1);
          absl::StatusOr<Json> put = client().Update(kConfigMaps, *cm);
          if (put.ok()) break;
          ASSERT_TRUE(IsConflict(put.status())) << put.status();
          ++conflicts;
        }
      }
    });
  }
  for (std::thread& t : writers) t.join();
  EXPECT_EQ((*client().Get(kConfigMaps, ns(), "counter"))["data"]["n"], "20");
}

TEST_F(KubeClientServerTest, ListSelectorsAndPages) {
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(client()
                    .Create(kPods, ns(),
                            PodSpec(absl::StrCat("p", i), {{"app", i % 2 ? "odd" : "even"},
                                                           {"tier", i < 3 ? "low" : "high"}}))
                    .ok());
  }
  ListOptions options;
  options.label_selector = "app=odd,tier in (high)";
  absl::StatusOr<ObjectList> odd = client().List(kPods, ns(), options);
  ASSERT_TRUE(odd.ok()) << odd.status();
  EXPECT_EQ(odd->items.size(), 2u);  // p3, p5

  ListOptions paged;
  paged.limit = 3;
  absl::StatusOr<ObjectList> page = client().List(kPods, ns(), paged);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->items.size(), 3u);
  EXPECT_FALSE(page->continue_token.empty());
  ASSERT_TRUE(page->remaining_item_count.has_value());
  EXPECT_EQ(*page->remaining_item_count, 4);
  absl::StatusOr<ObjectList> all = client().ListAll(kPods, ns(), {}, 2);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->items.size(), 7u);

  ListOptions bad;
  bad.label_selector = "app in (";
  absl::StatusOr<ObjectList> refused = client().List(kPods, ns(), bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(HttpCodeOf(refused.status()), 400);
}

TEST_F(KubeClientServerTest, StatusSubresourceAndMergePatch) {
  // The CRD's schema requires a pod template with a container.
  Json worker{{"replicas", 1},
              {"template",
               {{"spec", {{"containers", {{{"name", "main"}, {"image", "kubetrain:test"}}}}}}}}};
  Json job{{"metadata", {{"name", "j"}}},
           {"spec", {{"replicaSpecs", {{"Worker", worker}}}}},
           {"status", {{"startTime", "2026-01-01T00:00:00Z"}}}};
  absl::StatusOr<Json> created = client().Create(kTrainingJobs, ns(), job);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_FALSE(created->contains("status") && (*created)["status"].contains("startTime"))
      << "create drops status";
  EXPECT_EQ(Generation(*created), 1);

  Json with_status = *created;
  with_status["status"] = {
      {"conditions", Json::array({{{"type", "Created"}, {"status", "True"}}})}};
  with_status["spec"]["replicaSpecs"]["Worker"]["replicas"] = 5;  // ignored by /status
  absl::StatusOr<Json> updated = client().UpdateStatus(kTrainingJobs, with_status);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ((*updated)["status"]["conditions"][0]["type"], "Created");
  EXPECT_EQ((*updated)["spec"]["replicaSpecs"]["Worker"]["replicas"], 1);
  EXPECT_EQ(Generation(*updated), 1);

  absl::StatusOr<Json> patched =
      client().MergePatch(kTrainingJobs, ns(), "j",
                          Json{{"spec", {{"replicaSpecs", {{"Worker", {{"replicas", 3}}}}}}}});
  ASSERT_TRUE(patched.ok()) << patched.status();
  EXPECT_EQ(Generation(*patched), 2);
  EXPECT_EQ((*patched)["status"]["conditions"][0]["type"], "Created");

  // A status the schema refuses is a 422, on the emulator as on a real server.
  Json bad_status = *patched;
  bad_status["status"]["conditions"][0]["status"] = "Maybe";
  absl::StatusOr<Json> refused = client().UpdateStatus(kTrainingJobs, bad_status);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(IsInvalid(refused.status())) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::HasSubstr("status.conditions.status: Unsupported value: \"Maybe\""));

  // A stale resourceVersion in a /status update is a conflict too.
  absl::StatusOr<Json> stale = client().UpdateStatus(kTrainingJobs, with_status);
  ASSERT_FALSE(stale.ok());
  EXPECT_TRUE(IsConflict(stale.status()));
}

TEST_F(KubeClientServerTest, DeletePreconditionsAndGarbageCollection) {
  absl::StatusOr<Json> owner =
      client().Create(kConfigMaps, ns(), Json{{"metadata", {{"name", "owner"}}}});
  ASSERT_TRUE(owner.ok());
  Json pod = PodSpec("child");
  pod["metadata"]["ownerReferences"] = Json::array({ControllerReference(*owner)});
  ASSERT_TRUE(client().Create(kPods, ns(), pod).ok());

  DeleteOptions wrong;
  wrong.precondition_uid = "00000000-0000-0000-0000-000000000000";
  absl::StatusOr<Json> refused = client().Delete(kConfigMaps, ns(), "owner", wrong);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(IsConflict(refused.status())) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("precondition"));

  DeleteOptions background;
  background.propagation_policy = "Background";
  background.precondition_uid = Uid(*owner);
  ASSERT_TRUE(client().Delete(kConfigMaps, ns(), "owner", background).ok());
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  bool gone = false;
  while (absl::Now() < deadline && !gone) {
    gone = absl::IsNotFound(client().Get(kPods, ns(), "child").status());
    if (!gone) absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(gone) << "the garbage collector removes the owned pod";
}

TEST_F(KubeClientServerTest, RetriesInjectedErrors) {
  KT_REQUIRE_EMULATOR(target_);
  target_->emulator()->InjectFault({.method = "GET",
                                    .path_substring = "/pods/x",
                                    .watch_only = false,
                                    .http_code = 429,
                                    .count = 2,
                                    .retry_after_seconds = 1});
  ASSERT_TRUE(client().Create(kPods, ns(), PodSpec("x")).ok());
  absl::Time start = absl::Now();
  absl::StatusOr<Json> got = client().Get(kPods, ns(), "x");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_GE(absl::Now() - start, absl::Seconds(2)) << "Retry-After was honoured";
  EXPECT_EQ(client().Stats().retries, 2);

  target_->emulator()->InjectFault({.method = "POST",
                                    .path_substring = "/pods",
                                    .watch_only = false,
                                    .http_code = 500,
                                    .count = 100,
                                    .retry_after_seconds = 0});
  absl::StatusOr<Json> failed = client().Create(kPods, ns(), PodSpec("y"));
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(IsServerError(failed.status()));
}

TEST(KubeClientNetworkTest, UnreachableServerIsClearNetworkError) {
  KubeConfig config;
  config.server = "http://127.0.0.1:1";  // nothing listens on port 1
  config.source = "test";
  RealConfigEnvironment env;
  RealClock clock;
  absl::StatusOr<std::unique_ptr<CpprestTransport>> transport =
      CpprestTransport::Create(config, {}, env, clock);
  ASSERT_TRUE(transport.ok());
  RetryPolicy retry;
  retry.max_attempts = 2;
  retry.initial_backoff = absl::Milliseconds(1);
  KubeClient client(*std::move(transport), retry);
  absl::StatusOr<Json> got = client.Get(kPods, "default", "x");
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(IsNetwork(got.status())) << got.status();
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("127.0.0.1:1"));

  config.ca_pem = "not a certificate";
  absl::StatusOr<std::unique_ptr<CpprestTransport>> bad_ca =
      CpprestTransport::Create(config, {}, env, clock);
  ASSERT_FALSE(bad_ca.ok());
  EXPECT_THAT(std::string(bad_ca.status().message()), HasSubstr("no PEM certificate"));
}

}  // namespace
}  // namespace kubetrain::kube
