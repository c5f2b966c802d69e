// KubeClient against a scripted transport: typed errors, retries, paging,
// watch decoding. Behaviour against a server is in kube_client_emulator_test.
#include "operator/kube/kube_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "operator/kube/api_error.h"
#include "operator/kube/object.h"
#include "operator/kube/object_cache.h"
#include "testing/fake_http_transport.h"

namespace kubetrain::kube {
namespace {

using ::testing::HasSubstr;

HttpResponse Answer(int status, std::string body, std::string retry_after = "") {
  return HttpResponse{status, std::move(body), std::move(retry_after)};
}

// Bodies as kube-apiserver writes them (../shared/notes/kube-api-transcripts).
constexpr char kNotFound[] =
    R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"x\" not found","reason":"NotFound","details":{"name":"x","kind":"pods"},"code":404})";
constexpr char kAlreadyExists[] =
    R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"x\" already exists","reason":"AlreadyExists","details":{"name":"x","kind":"pods"},"code":409})";
constexpr char kConflict[] =
    R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Operation cannot be fulfilled on pods \"x\": the object has been modified; please apply your changes to the latest version and try again","reason":"Conflict","details":{"name":"x","kind":"pods"},"code":409})";
constexpr char kTooMany[] =
    R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too many requests","reason":"TooManyRequests","details":{"retryAfterSeconds":1},"code":429})";

std::unique_ptr<KubeClient> MakeClient(FakeHttpTransport** fake, RetryPolicy retry = {}) {
  auto transport = std::make_unique<FakeHttpTransport>();
  *fake = transport.get();
  retry.initial_backoff = absl::Milliseconds(1);
  retry.max_backoff = absl::Milliseconds(5);
  retry.max_retry_after = absl::Milliseconds(20);
  return std::make_unique<KubeClient>(std::move(transport), retry);
}

TEST(ApiErrorTest, TypedFromStatusBodies) {
  absl::Status s = StatusFromHttp(404, kNotFound, "", "GET /x");
  EXPECT_TRUE(absl::IsNotFound(s));
  EXPECT_EQ(KindOf(s), ApiErrorKind::kNotFound);
  EXPECT_EQ(HttpCodeOf(s), 404);
  EXPECT_EQ(ReasonOf(s), "NotFound");
  EXPECT_THAT(std::string(s.message()), HasSubstr("pods \"x\" not found"));

  EXPECT_TRUE(absl::IsAlreadyExists(StatusFromHttp(409, kAlreadyExists, "", "POST")));
  absl::Status conflict = StatusFromHttp(409, kConflict, "", "PUT");
  EXPECT_TRUE(IsConflict(conflict));
  EXPECT_FALSE(absl::IsAlreadyExists(conflict));

  absl::Status busy = StatusFromHttp(429, kTooMany, "", "GET");
  EXPECT_TRUE(IsTooManyRequests(busy));
  EXPECT_TRUE(IsRetryable(busy));
  ASSERT_TRUE(RetryAfter(busy).has_value());
  EXPECT_EQ(*RetryAfter(busy), absl::Seconds(1));
  EXPECT_EQ(*RetryAfter(StatusFromHttp(503, "", "7", "GET")), absl::Seconds(7));

  absl::Status page = StatusFromHttp(404, "404 page not found\n", "", "GET /apis/x");
  EXPECT_TRUE(absl::IsNotFound(page));
  EXPECT_THAT(std::string(page.message()), HasSubstr("404 page not found"));

  EXPECT_TRUE(IsGone(StatusFromHttp(410, "", "", "GET")));
  EXPECT_TRUE(IsForbidden(StatusFromHttp(403, "", "", "GET")));
  EXPECT_TRUE(IsInvalid(StatusFromHttp(422, "", "", "POST")));
  EXPECT_TRUE(IsServerError(StatusFromHttp(500, "", "", "POST")));
  EXPECT_FALSE(IsRetryable(StatusFromHttp(422, "", "", "POST")));
  EXPECT_TRUE(IsNetwork(NetworkError("GET", "refused")));
  EXPECT_EQ(KindOf(absl::OkStatus()), ApiErrorKind::kNone);
  EXPECT_EQ(KindOf(absl::InternalError("plain")), ApiErrorKind::kOther);

  // Bodies of an unexpected shape (a proxy, an aggregated API) still give a
  // typed error by HTTP code.
  for (const char* odd : {R"({"kind":5})", R"({"kind":null,"message":1})", "[1,2]", "null"}) {
    absl::Status s = StatusFromHttp(502, odd, "", "GET /x");
    EXPECT_TRUE(IsServerError(s)) << odd;
  }
}

TEST(KubeClientTest, RetriesTooManyRequestsHonouringRetryAfter) {
  FakeHttpTransport* fake;
  auto client = MakeClient(&fake);
  std::atomic<int> calls{0};
  fake->OnSend([&](const HttpRequest&) -> absl::StatusOr<HttpResponse> {
    if (++calls <= 2) return Answer(429, kTooMany, "1");
    return Answer(201, R"({"metadata":{"name":"p"}})");
  });
  absl::StatusOr<Json> created = client->Create(kPods, "ns", Json{{"metadata", {{"name", "p"}}}});
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(calls.load(), 3);
  EXPECT_EQ(client->Stats().retries, 2);
  std::vector<HttpRequest> requests = fake->Requests();
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].target, "/api/v1/namespaces/ns/pods");
  Json sent = Json::parse(requests[0].body);
  EXPECT_EQ(sent["kind"], "Pod");
  EXPECT_EQ(sent["apiVersion"], "v1");
}

TEST(KubeClientTest, GivesUpAfterMaxAttempts) {
  FakeHttpTransport* fake;
  RetryPolicy retry;
  retry.max_attempts = 3;
  auto client = MakeClient(&fake, retry);
  fake->OnSend([](const HttpRequest&) -> absl::StatusOr<HttpResponse> {
    return Answer(500, R"({"kind":"Status","code":500,"reason":"InternalError","message":"boom"})");
  });
  absl::StatusOr<Json> got = client->Get(kPods, "ns", "p");
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(IsServerError(got.status()));
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("boom"));
  EXPECT_EQ(fake->Requests().size(), 3u);
}

TEST(KubeClientTest, NetworkErrorsRetriedOnlyForReads) {
  FakeHttpTransport* fake;
  auto client = MakeClient(&fake);
  std::atomic<int> calls{0};
  fake->OnSend([&](const HttpRequest& r) -> absl::StatusOr<HttpResponse> {
    ++calls;
    if (r.method == "GET" && calls.load() == 1) return absl::UnavailableError("reset");
    if (r.method == "GET") return Answer(200, R"({"metadata":{"name":"p"}})");
    return absl::UnavailableError("connection refused");
  });
  EXPECT_TRUE(client->Get(kPods, "ns", "p").ok());
  EXPECT_EQ(calls.load(), 2);
  calls = 0;
  absl::StatusOr<Json> created = client->Create(kPods, "ns", Json::object());
  ASSERT_FALSE(created.ok());
  EXPECT_TRUE(IsNetwork(created.status()));
  EXPECT_THAT(std::string(created.status().message()), HasSubstr("connection refused"));
  EXPECT_EQ(calls.load(), 1);  // the server may have applied it: not repeated
}

TEST(KubeClientTest, ConflictIsSurfacedNotRetried) {
  FakeHttpTransport* fake;
  auto client = MakeClient(&fake);
  fake->OnSend(
      [](const HttpRequest&) -> absl::StatusOr<HttpResponse> { return Answer(409, kConflict); });
  Json pod{{"metadata", {{"name", "x"}, {"namespace", "ns"}, {"resourceVersion", "5"}}}};
  absl::StatusOr<Json> updated = client->Update(kPods, pod);
  ASSERT_FALSE(updated.ok());
  EXPECT_TRUE(IsConflict(updated.status()));
  EXPECT_EQ(fake->Requests().size(), 1u);
  EXPECT_EQ(fake->Requests()[0].target, "/api/v1/namespaces/ns/pods/x");
}

TEST(KubeClientTest, BadJsonAnswerIsDecodeError) {
  FakeHttpTransport* fake;
  auto client = MakeClient(&fake);
  fake->OnSend(
      [](const HttpRequest&) -> absl::StatusOr<HttpResponse> { return Answer(200, "{not json"); });
  absl::StatusOr<Json> got = client->Get(kPods, "ns", "p");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(KindOf(got.status()), ApiErrorKind::kDecode);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("not JSON"));
}

TEST(KubeClientTest, ListAllFollowsContinueAndRestartsOnExpiredToken) {
  FakeHttpTransport* fake;
  auto client = MakeClient(&fake);
  std::atomic<bool> expired_once{false};
  fake->OnSend([&](const HttpRequest& r) -> absl::StatusOr<HttpResponse> {
    if (absl::StrContains(r.target, "continue=t2") && !expired_once.exchange(true)) {
      return Answer(410, R"({"kind":"Status","code":410,"reason":"Expired","message":"too old"})");
    }
    if (absl::StrContains(r.target, "continue=t1")) {
      return Answer(
          200,
          R"({"metadata":{"resourceVersion":"9","continue":"t2"},"items":[{"metadata":{"name":"b"}}]})");
    }
    if (absl::StrContains(r.target, "continue=t2")) {
      return Answer(200,
                    R"({"metadata":{"resourceVersion":"9"},"items":[{"metadata":{"name":"c"}}]})");
    }
    return Answer(
        200,
        R"({"metadata":{"resourceVersion":"9","continue":"t1"},"items":[{"metadata":{"name":"a"}}]})");
  });
  ListOptions options;
  options.label_selector = "app=x";
  absl::StatusOr<ObjectList> all = client->ListAll(kPods, "ns", options, 1);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->items.size(), 3u);
  EXPECT_EQ(all->items[2]["metadata"]["name"], "c");
  EXPECT_EQ(all->items[0]["kind"], "Pod");  // list items get their kind back
  EXPECT_EQ(all->resource_version, "9");
  EXPECT_THAT(fake->Requests()[0].target, HasSubstr("labelSelector=app%3Dx&limit=1"));
}

TEST(KubeClientTest, ListAllAppliesEachToEveryItemAsItsPageArrives) {
  FakeHttpTransport* fake;
  auto client = MakeClient(&fake);
  std::atomic<int> pages{0};
  fake->OnSend([&](const HttpRequest& r) -> absl::StatusOr<HttpResponse> {
    ++pages;
    if (absl::StrContains(r.target, "continue=t1")) {
      return Answer(
          200,
          R"({"metadata":{"resourceVersion":"9"},"items":[{"metadata":{"name":"b"},"spec":2}]})");
    }
    return Answer(
        200,
        R"({"metadata":{"resourceVersion":"9","continue":"t1"},"items":[{"metadata":{"name":"a"},"spec":1}]})");
  });
  std::vector<std::pair<std::string, int>> seen;  // (name, pages answered by then)
  absl::StatusOr<ObjectList> all = client->ListAll(kPods, "ns", {}, 1, [&](Json& item) {
    seen.emplace_back(item["metadata"]["name"].get<std::string>(), pages.load());
    item.erase("spec");
  });
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->items.size(), 2u);
  // Each item was handled before the next page was asked for.
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, int>>{{"a", 1}, {"b", 2}}));
  for (const Json& item : all->items) EXPECT_FALSE(item.contains("spec"));
}

TEST(WatchDecodeTest, EventsErrorsAndMalformedLines) {
  absl::StatusOr<WatchEvent> e =
      DecodeWatchLine(R"({"type":"ADDED","object":{"metadata":{"name":"a"}}})");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->type, WatchEventType::kAdded);
  EXPECT_EQ(e->object["metadata"]["name"], "a");

  absl::StatusOr<WatchEvent> gone = DecodeWatchLine(
      R"j({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (200)","reason":"Expired","code":410}})j");
  ASSERT_FALSE(gone.ok());
  EXPECT_TRUE(IsGone(gone.status()));
  EXPECT_THAT(std::string(gone.status().message()), HasSubstr("too old resource version"));

  // An ERROR event whose code is not a number is a server error.
  for (const char* odd : {R"({"type":"ERROR","object":{"code":"410"}})",
                          R"({"type":"ERROR","object":{"code":null}})"}) {
    absl::StatusOr<WatchEvent> d = DecodeWatchLine(odd);
    ASSERT_FALSE(d.ok()) << odd;
    EXPECT_TRUE(IsServerError(d.status())) << odd << ": " << d.status();
  }

  for (const char* bad :
       {"{\"type\":\"ADDED\",", "[]", R"({"type":"ERROR","object":"gone"})", R"({"type":"ADDED"})",
        R"({"type":"WHAT","object":{}})", "\x01\x02garbage"}) {
    absl::StatusOr<WatchEvent> d = DecodeWatchLine(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(KindOf(d.status()), ApiErrorKind::kDecode) << bad;
  }
}

TEST(KubeClientTest, WatchStreamReportsBadLineAndDrop) {
  FakeHttpTransport* fake;
  auto client = MakeClient(&fake);
  fake->OnStream([](const HttpRequest& r) -> absl::StatusOr<StreamResponse> {
    StreamResponse out;
    out.status = 200;
    out.stream = std::make_unique<ScriptedStream>(
        std::vector<std::string>{R"({"type":"ADDED","object":{"metadata":{"name":"a"}}})", "",
                                 "{oops"},
        absl::UnavailableError("connection reset"));
    return out;
  });
  WatchOptions options;
  options.resource_version = "7";
  options.timeout_seconds = 30;
  absl::StatusOr<std::unique_ptr<WatchStream>> watch = client->Watch(kPods, "ns", options);
  ASSERT_TRUE(watch.ok()) << watch.status();
  EXPECT_THAT(fake->Requests()[0].target,
              HasSubstr("watch=1&resourceVersion=7&timeoutSeconds=30&allowWatchBookmarks=true"));
  WatchEvent event;
  ASSERT_TRUE(*(*watch)->Next(&event));
  absl::StatusOr<bool> bad = (*watch)->Next(&event);  // the empty line is skipped
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(KindOf(bad.status()), ApiErrorKind::kDecode);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("{oops"));
  absl::StatusOr<bool> dropped = (*watch)->Next(&event);
  ASSERT_FALSE(dropped.ok());
  EXPECT_TRUE(IsNetwork(dropped.status()));
}

TEST(KubeClientTest, WatchRefusedWithStatus) {
  FakeHttpTransport* fake;
  auto client = MakeClient(&fake);
  fake->OnStream([](const HttpRequest&) -> absl::StatusOr<StreamResponse> {
    StreamResponse out;
    out.status = 403;
    out.error = Answer(
        403,
        R"({"kind":"Status","code":403,"reason":"Forbidden","message":"pods is forbidden: User \"system:anonymous\" cannot watch resource \"pods\""})");
    return out;
  });
  absl::StatusOr<std::unique_ptr<WatchStream>> watch = client->Watch(kPods, "", {});
  ASSERT_FALSE(watch.ok());
  EXPECT_TRUE(IsForbidden(watch.status()));
  EXPECT_THAT(std::string(watch.status().message()), HasSubstr("cannot watch"));
}

TEST(KubeClientTest, GetTextReturnsTheBodyAsItCameAndRetries) {
  FakeHttpTransport* fake;
  auto client = MakeClient(&fake);
  std::atomic<int> calls{0};
  fake->OnSend([&](const HttpRequest& r) -> absl::StatusOr<HttpResponse> {
    if (calls++ == 0) return Answer(503, "");
    EXPECT_EQ(r.method, "GET");
    return Answer(200, "line one\nnot json {\n");
  });
  absl::StatusOr<std::string> text =
      client->GetText("/api/v1/namespaces/ns/pods/p/log?tailLines=2");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "line one\nnot json {\n");
  EXPECT_EQ(calls.load(), 2);
  EXPECT_EQ(fake->Requests()[1].target, "/api/v1/namespaces/ns/pods/p/log?tailLines=2");

  fake->OnSend(
      [](const HttpRequest&) -> absl::StatusOr<HttpResponse> { return Answer(404, kNotFound); });
  absl::StatusOr<std::string> missing = client->GetText("/api/v1/namespaces/ns/pods/x/log");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
}

TEST(KubeClientTest, StreamTextReadsLinesAndSurfacesRefusals) {
  FakeHttpTransport* fake;
  auto client = MakeClient(&fake);
  fake->OnStream([](const HttpRequest& r) -> absl::StatusOr<StreamResponse> {
    StreamResponse out;
    if (absl::StrContains(r.target, "/pods/gone/")) {
      out.status = 400;
      out.error = Answer(
          400,
          R"({"kind":"Status","code":400,"reason":"BadRequest","message":"container \"c\" in pod \"gone\" is waiting to start: ContainerCreating"})");
      return out;
    }
    out.status = 200;
    out.stream =
        std::make_unique<ScriptedStream>(std::vector<std::string>{"a", "{b"}, absl::OkStatus());
    return out;
  });
  absl::StatusOr<std::unique_ptr<HttpStream>> stream =
      client->StreamText("/api/v1/namespaces/ns/pods/p/log?follow=true", absl::Minutes(5));
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::string line;
  ASSERT_TRUE(*(*stream)->ReadLine(&line));
  EXPECT_EQ(line, "a");
  ASSERT_TRUE(*(*stream)->ReadLine(&line));
  EXPECT_EQ(line, "{b");
  EXPECT_FALSE(*(*stream)->ReadLine(&line));

  absl::StatusOr<std::unique_ptr<HttpStream>> refused =
      client->StreamText("/api/v1/namespaces/ns/pods/gone/log?follow=true", absl::Minutes(5));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(KindOf(refused.status()), ApiErrorKind::kBadRequest);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("waiting to start"));

  fake->OnStream(nullptr);
  absl::StatusOr<std::unique_ptr<HttpStream>> unreachable =
      client->StreamText("/api/v1/namespaces/ns/pods/p/log", absl::Minutes(5));
  ASSERT_FALSE(unreachable.ok());
  EXPECT_TRUE(IsNetwork(unreachable.status()));
}

// Write-through of our own writes: only a newer version replaces, nothing
// is inserted, and older watch events can be recognised.
TEST(ObjectCacheTest, ReplaceIfNewerKeepsTheLatestVersion) {
  EXPECT_TRUE(NewerResourceVersion("10", "9"));  // numbers, not strings
  EXPECT_FALSE(NewerResourceVersion("9", "10"));
  EXPECT_FALSE(NewerResourceVersion("7", "7"));
  EXPECT_FALSE(NewerResourceVersion("abc", "1"));  // not comparable: no claim
  ObjectCache cache;
  auto job = [](std::string rv, std::string label) {
    return std::make_shared<const Json>(Json{{"metadata",
                                              {{"name", "j"},
                                               {"namespace", "n"},
                                               {"resourceVersion", rv},
                                               {"labels", {{"v", label}}}}}});
  };
  EXPECT_FALSE(cache.ReplaceIfNewer(job("5", "a")));  // never inserts
  EXPECT_EQ(cache.Size(), 0u);
  cache.Upsert(job("9", "a"));
  EXPECT_FALSE(cache.ReplaceIfNewer(job("8", "b")));
  EXPECT_TRUE(cache.ReplaceIfNewer(job("10", "c")));
  EXPECT_EQ(ResourceVersionOf(*cache.Get("n/j")), "10");
  EXPECT_EQ(cache.ByIndex(kIndexLabel, "v=c").size(), 1u);  // indexes follow
  EXPECT_TRUE(cache.ByIndex(kIndexLabel, "v=a").empty());
  EXPECT_TRUE(cache.HasNewerThan(*job("9", "a")));
  EXPECT_FALSE(cache.HasNewerThan(*job("10", "c")));
  EXPECT_FALSE(cache.HasNewerThan(*job("11", "d")));
}

TEST(ObjectCacheTest, IndexesFollowUpdatesAndRemovals) {
  ObjectCache cache;
  auto pod = [](std::string name, std::string ns, std::string owner, std::string app) {
    return std::make_shared<const Json>(
        Json{{"metadata",
              {{"name", name},
               {"namespace", ns},
               {"labels", {{"app", app}}},
               {"ownerReferences", Json::array({{{"uid", owner}, {"controller", true}}})}}}});
  };
  EXPECT_EQ(cache.Upsert(pod("a", "n1", "u1", "x")), nullptr);
  cache.Upsert(pod("b", "n1", "u2", "x"));
  cache.Upsert(pod("a", "n2", "u1", "y"));
  EXPECT_EQ(cache.Size(), 3u);
  EXPECT_EQ(cache.ByIndex(kIndexNamespace, "n1").size(), 2u);
  EXPECT_EQ(cache.ByIndex(kIndexOwnerUid, "u1").size(), 2u);
  EXPECT_EQ(cache.ByIndex(kIndexLabel, "app=x").size(), 2u);
  ObjectPtr old = cache.Upsert(pod("a", "n1", "u3", "z"));  // relabel and re-own
  ASSERT_NE(old, nullptr);
  EXPECT_EQ(cache.ByIndex(kIndexLabel, "app=x").size(), 1u);
  EXPECT_EQ(cache.ByIndex(kIndexOwnerUid, "u3").size(), 1u);
  EXPECT_NE(cache.Remove("n1/b"), nullptr);
  EXPECT_EQ(cache.Remove("n1/b"), nullptr);
  EXPECT_TRUE(cache.ByIndex(kIndexOwnerUid, "u2").empty());
  cache.AddIndex("name", [](const Json& o) { return std::vector<std::string>{Name(o)}; });
  EXPECT_EQ(cache.ByIndex("name", "a").size(), 2u);
  std::vector<ObjectPtr> dropped = cache.Replace({pod("c", "n1", "u1", "x")});
  EXPECT_EQ(dropped.size(), 2u);
  EXPECT_EQ(cache.ByIndex("name", "c").size(), 1u);
  EXPECT_TRUE(cache.ByIndex(kIndexNamespace, "n2").empty());
}

}  // namespace
}  // namespace kubetrain::kube
