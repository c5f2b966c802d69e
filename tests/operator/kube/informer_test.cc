// Informer against a server: the cache converges with the server's state
// after dropped watches, expired versions (410) and injected 500s.
#include "operator/kube/informer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "operator/kube/object.h"
#include "testing/fake_http_transport.h"
#include "testing/kube_test_target.h"
#include "tests/support/wait_for.h"

namespace kubetrain::kube {
namespace {

using ::kubetrain::testing_util::WaitFor;

using testing::KubeTestTarget;

Json Pod(const std::string& name, const std::string& app = "x") {
  return Json{{"metadata", {{"name", name}, {"labels", {{"app", app}}}}},
              {"spec", {{"containers", Json::array({{{"name", "c"}, {"image", "busybox"}}})}}}};
}

// name -> resourceVersion, from the server and from the cache.
std::map<std::string, std::string> ServerState(KubeClient& client, const std::string& ns) {
  std::map<std::string, std::string> out;
  absl::StatusOr<ObjectList> list = client.ListAll(kPods, ns);
  if (!list.ok()) return out;
  for (const Json& item : list->items) out[Name(item)] = ResourceVersionOf(item);
  return out;
}
std::map<std::string, std::string> CacheState(const Informer& informer) {
  std::map<std::string, std::string> out;
  for (const ObjectPtr& o : informer.cache().List()) out[Name(*o)] = ResourceVersionOf(*o);
  return out;
}

class Counting {
 public:
  InformerHandlers Handlers() {
    return InformerHandlers{[this](const ObjectPtr& o) {
                              absl::MutexLock l(&mu_);
                              ++adds_;
                              live_.insert(Name(*o));
                            },
                            [this](const ObjectPtr&, const ObjectPtr& o) {
                              absl::MutexLock l(&mu_);
                              ++updates_;
                              live_.insert(Name(*o));
                            },
                            [this](const ObjectPtr& o) {
                              absl::MutexLock l(&mu_);
                              ++deletes_;
                              live_.erase(Name(*o));
                            }};
  }
  std::set<std::string> Live() {
    absl::MutexLock l(&mu_);
    return live_;
  }
  int Adds() {
    absl::MutexLock l(&mu_);
    return adds_;
  }
  int Deletes() {
    absl::MutexLock l(&mu_);
    return deletes_;
  }

 private:
  absl::Mutex mu_;
  int adds_ = 0, updates_ = 0, deletes_ = 0;
  std::set<std::string> live_;
};

class InformerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<KubeTestTarget>> target = KubeTestTarget::Create();
    ASSERT_TRUE(target.ok()) << target.status();
    target_ = *std::move(target);
  }
  // `clock`: the informer's (backoff, resync); a real one unless given.
  std::unique_ptr<Informer> Make(InformerOptions options = {}, const Clock* clock = nullptr) {
    options.namespace_name = target_->ns();
    options.min_backoff = absl::Milliseconds(20);
    options.max_backoff = absl::Milliseconds(200);
    return std::make_unique<Informer>(target_->client(), kPods, options,
                                      clock != nullptr ? *clock : real_clock_, &logger_);
  }
  bool Converged(const Informer& informer) {
    return WaitFor(
        [&] { return CacheState(informer) == ServerState(target_->client(), target_->ns()); });
  }
  KubeClient& client() { return target_->client(); }
  std::unique_ptr<KubeTestTarget> target_;
  RealClock real_clock_;
  StreamLogger logger_{std::cerr, StreamLogger::Format::kText, LogLevel::kWarning};
};

TEST_F(InformerTest, ListsThenFollowsWatchWithHandlers) {
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(client().Create(kPods, target_->ns(), Pod(absl::StrCat("pre", i))).ok());
  auto informer = Make();
  Counting counting;
  informer->AddHandlers(counting.Handlers());
  informer->Start();
  ASSERT_TRUE(informer->WaitForSync(absl::Seconds(20)));
  EXPECT_TRUE(informer->HasSynced());
  EXPECT_EQ(informer->cache().Size(), 5u);
  ASSERT_TRUE(client().Create(kPods, target_->ns(), Pod("live")).ok());
  ASSERT_TRUE(client()
                  .MergePatch(kPods, target_->ns(), "pre0",
                              Json{{"metadata", {{"labels", {{"app", "y"}}}}}})
                  .ok());
  ASSERT_TRUE(client().Delete(kPods, target_->ns(), "pre1").ok());
  EXPECT_TRUE(Converged(*informer));
  EXPECT_TRUE(
      WaitFor([&] { return counting.Live().count("live") && !counting.Live().count("pre1"); }));
  EXPECT_EQ(informer->cache().ByIndex(kIndexLabel, "app=y").size(), 1u);
  EXPECT_EQ(informer->cache().ByIndex(kIndexNamespace, target_->ns()).size(), 5u);
  informer->Stop();
}

TEST_F(InformerTest, ConvergesAfterDroppedWatchesAnd500s) {
  KT_REQUIRE_EMULATOR(target_);
  auto informer = Make();
  Counting counting;
  informer->AddHandlers(counting.Handlers());
  informer->Start();
  ASSERT_TRUE(informer->WaitForSync(absl::Seconds(20)));
  for (int round = 0; round < 3; ++round) {
    // Keep the watch down with 500s while the world changes.
    target_->emulator()->InjectFault({.method = "GET",
                                      .path_substring = "/pods",
                                      .watch_only = true,
                                      .http_code = 500,
                                      .count = 3,
                                      .retry_after_seconds = 0});
    target_->emulator()->DropWatches();
    ASSERT_TRUE(client().Create(kPods, target_->ns(), Pod(absl::StrCat("r", round))).ok());
    if (round > 0) {
      ASSERT_TRUE(client().Delete(kPods, target_->ns(), absl::StrCat("r", round - 1)).ok());
    }
    ASSERT_TRUE(Converged(*informer)) << "round " << round;
  }
  EXPECT_GE(informer->Stats().watch_errors, 3);
  // Handlers run after the cache changed: wait for them too.
  EXPECT_TRUE(WaitFor([&] { return counting.Live() == std::set<std::string>{"r2"}; }));
}

TEST_F(InformerTest, RelistsAfterExpiredVersionAndSeesDeletesMissedMeanwhile) {
  KT_REQUIRE_EMULATOR(target_);
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(client().Create(kPods, target_->ns(), Pod(absl::StrCat("k", i))).ok());
  auto informer = Make();
  Counting counting;
  informer->AddHandlers(counting.Handlers());
  informer->Start();
  ASSERT_TRUE(informer->WaitForSync(absl::Seconds(20)));
  // Watches fail while objects change, then the history is compacted: the
  // resumed watch gets 410 and the informer must list again.
  target_->emulator()->InjectFault({.method = "GET",
                                    .path_substring = "/pods",
                                    .watch_only = true,
                                    .http_code = 500,
                                    .count = 2,
                                    .retry_after_seconds = 0});
  target_->emulator()->DropWatches();
  ASSERT_TRUE(client().Delete(kPods, target_->ns(), "k0").ok());
  ASSERT_TRUE(client().Create(kPods, target_->ns(), Pod("k9")).ok());
  target_->emulator()->Compact();
  target_->emulator()->DropWatches();
  ASSERT_TRUE(Converged(*informer));
  EXPECT_TRUE(WaitFor([&] { return informer->Stats().relists_after_gone >= 1; }));
  EXPECT_EQ(informer->Stats().decode_errors, 0);
  EXPECT_TRUE(WaitFor([&] {
    return counting.Live() == std::set<std::string>{"k1", "k2", "k3", "k9"};
  }));
  EXPECT_GE(informer->Stats().lists, 2);
}

TEST(StripServerBookkeepingTest, DropsManagedFieldsAndLastApplied) {
  Json pod{{"metadata",
            {{"name", "p"},
             {"managedFields", Json::array({{{"manager", "kubectl"}}})},
             {"annotations",
              {{"kubectl.kubernetes.io/last-applied-configuration", "{...}"}, {"keep", "me"}}}}},
           {"spec", {{"nodeName", "n"}}}};
  StripServerBookkeeping(pod);
  EXPECT_FALSE(pod["metadata"].contains("managedFields"));
  EXPECT_EQ(pod["metadata"]["annotations"], (Json{{"keep", "me"}}));
  EXPECT_EQ(pod["spec"]["nodeName"], "n");
  Json bare{
      {"metadata", {{"annotations", {{"kubectl.kubernetes.io/last-applied-configuration", "x"}}}}}};
  StripServerBookkeeping(bare);
  EXPECT_FALSE(bare["metadata"].contains("annotations"));
  Json odd = Json::array();
  StripServerBookkeeping(odd);  // not an object: left alone
  EXPECT_TRUE(odd.is_array());
}

TEST_F(InformerTest, TransformAppliesToListedAndWatchedObjects) {
  Json annotated = Pod("listed");
  annotated["metadata"]["annotations"] = {{"drop", "x"}};
  ASSERT_TRUE(client().Create(kPods, target_->ns(), annotated).ok());
  InformerOptions options;
  options.transform = [](Json& o) { o["metadata"]["annotations"].erase("drop"); };
  auto informer = Make(options);
  informer->Start();
  ASSERT_TRUE(informer->WaitForSync(absl::Seconds(20)));
  annotated["metadata"]["name"] = "watched";
  ASSERT_TRUE(client().Create(kPods, target_->ns(), annotated).ok());
  ASSERT_TRUE(WaitFor([&] { return informer->cache().Size() == 2; }));
  for (const ObjectPtr& o : informer->cache().List()) {
    EXPECT_FALSE((*o)["metadata"]["annotations"].contains("drop")) << Name(*o);
  }
}

TEST_F(InformerTest, ResyncRedeliversEverythingEachPeriodOfItsClock) {
  ASSERT_TRUE(client().Create(kPods, target_->ns(), Pod("a")).ok());
  InformerOptions options;
  options.resync_period = absl::Hours(1);
  FakeClock clock;
  auto informer = Make(options, &clock);
  std::atomic<int> resyncs{0};
  informer->AddHandlers({nullptr,
                         [&](const ObjectPtr& old_obj, const ObjectPtr& new_obj) {
                           if (old_obj == new_obj) ++resyncs;
                         },
                         nullptr});
  informer->Start();
  ASSERT_TRUE(WaitFor([&] { return informer->HasSynced(); }));
  // Each hour on the informer's clock redelivers the one pod, once.
  for (int hour = 1; hour <= 3; ++hour) {
    clock.Advance(absl::ToInt64Nanoseconds(absl::Hours(1)));
    ASSERT_TRUE(WaitFor([&] { return resyncs.load() >= hour; })) << "hour " << hour;
  }
  EXPECT_EQ(resyncs.load(), 3);
}

TEST_F(InformerTest, StopReturnsPromptlyWithAnOpenWatch) {
  auto informer = Make();
  informer->Start();
  ASSERT_TRUE(informer->WaitForSync(absl::Seconds(20)));
  ASSERT_TRUE(WaitFor([&] { return informer->Stats().watches >= 1; }));
  absl::Time start = absl::Now();
  informer->Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

// Malformed watch lines (which a server should never send) give a clear
// logged error and a resumed watch, never a crash.
TEST(InformerFakeTest, MalformedLinesAreReportedAndTheWatchResumes) {
  auto transport = std::make_unique<FakeHttpTransport>();
  FakeHttpTransport* fake = transport.get();
  fake->OnSend([](const HttpRequest&) -> absl::StatusOr<HttpResponse> {
    return HttpResponse{200, R"({"metadata":{"resourceVersion":"10"},"items":[]})", ""};
  });
  std::atomic<int> watches{0};
  fake->OnStream([&](const HttpRequest&) -> absl::StatusOr<StreamResponse> {
    StreamResponse out;
    out.status = 200;
    int n = ++watches;
    std::vector<std::string> lines;
    if (n == 1) {
      lines = {
          R"({"type":"ADDED","object":{"metadata":{"name":"a","namespace":"n","resourceVersion":"11"}}})",
          "this is not json"};
    } else {
      lines = {
          R"({"type":"ADDED","object":{"metadata":{"name":"b","namespace":"n","resourceVersion":"12"}}})"};
    }
    out.stream = std::make_unique<ScriptedStream>(lines, absl::OkStatus());
    return out;
  });
  KubeClient client(std::move(transport));
  std::ostringstream log;
  StreamLogger logger(log, StreamLogger::Format::kText, LogLevel::kInfo);
  InformerOptions options;
  options.min_backoff = absl::Milliseconds(1);
  options.max_backoff = absl::Milliseconds(5);
  options.watch_timeout_seconds = 60;
  RealClock clock;
  Informer informer(client, kPods, options, clock, &logger);
  informer.Start();
  ASSERT_TRUE(WaitFor([&] { return informer.cache().Size() == 2; }));
  informer.Stop();
  EXPECT_EQ(informer.Stats().decode_errors, 1);
  EXPECT_THAT(log.str(), ::testing::HasSubstr("malformed event line: this is not json"));
  // The second watch resumed from the last good version.
  bool resumed = false;
  for (const HttpRequest& r : fake->Requests()) {
    if (r.target.find("watch=1&resourceVersion=11") != std::string::npos) resumed = true;
  }
  EXPECT_TRUE(resumed);
}

}  // namespace
}  // namespace kubetrain::kube
