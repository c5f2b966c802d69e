// The event recorder never makes its caller wait for the API: events are
// posted by its own thread, in order; beyond max_pending they are dropped and
// counted; Flush waits until the queue is posted.
#include "operator/controller/event_recorder.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "base/clock.h"
#include "gtest/gtest.h"
#include "operator/kube/logger.h"
#include "testing/fake_http_transport.h"

namespace kubetrain::controller {
namespace {

const nlohmann::json kJob = {
    {"apiVersion", "kubetrain.io/v1alpha1"},
    {"kind", "TrainingJob"},
    {"metadata", {{"name", "mnist"}, {"namespace", "ns"}, {"uid", "u-1"}}}};

struct Api {
  kube::FakeHttpTransport* fake = nullptr;
  std::unique_ptr<kube::KubeClient> client;
  absl::Notification release;  // the API answers once notified

  Api() {
    auto transport = std::make_unique<kube::FakeHttpTransport>();
    fake = transport.get();
    fake->OnSend([this](const kube::HttpRequest& r) -> absl::StatusOr<kube::HttpResponse> {
      release.WaitForNotification();
      return kube::HttpResponse{201, r.body, ""};
    });
    client = std::make_unique<kube::KubeClient>(std::move(transport));
  }
  std::vector<std::string> Reasons() const {
    std::vector<std::string> out;
    for (const kube::HttpRequest& r : fake->Requests()) {
      out.push_back(nlohmann::json::parse(r.body).value("reason", ""));
    }
    return out;
  }
};

TEST(EventRecorderTest, RecordNeverWaitsForTheApiAndEventsGoOutInOrder) {
  Api api;
  FakeClock clock;
  kube::NullLogger logger;
  EventRecorder recorder(*api.client, clock, &logger);
  // The API does not answer yet: Record still returns.
  recorder.Record(kJob, kEventNormal, "SuccessfulCreatePod", "Created pods: a, b");
  recorder.Record(kJob, kEventWarning, "Restarting", "worker-1 exited 137");
  api.release.Notify();
  ASSERT_TRUE(recorder.Flush(absl::Seconds(20)));
  EXPECT_EQ(api.Reasons(), (std::vector<std::string>{"SuccessfulCreatePod", "Restarting"}));
  const kube::HttpRequest first = api.fake->Requests()[0];
  EXPECT_EQ(first.method, "POST");
  EXPECT_EQ(first.target, "/api/v1/namespaces/ns/events");
  const nlohmann::json event = nlohmann::json::parse(first.body);
  EXPECT_EQ(event["involvedObject"]["uid"], "u-1");
  EXPECT_EQ(event["message"], "Created pods: a, b");
  EXPECT_EQ(event["firstTimestamp"], "2026-01-01T00:00:00Z");  // the FakeClock's wall time
  EXPECT_EQ(recorder.dropped(), 0);
}

TEST(EventRecorderTest, BeyondMaxPendingEventsAreDroppedAndCounted) {
  Api api;
  FakeClock clock;
  kube::NullLogger logger;
  EventRecorder recorder(*api.client, clock, &logger, "kubetrain-operator", /*max_pending=*/2);
  // The sender takes at most one off the queue while the API hangs, so of
  // five events two or three are kept and the rest dropped.
  for (int i = 0; i < 5; ++i) {
    recorder.Record(kJob, kEventNormal, absl::StrCat("E", i), "");
  }
  const int64_t dropped = recorder.dropped();
  EXPECT_GE(dropped, 2);
  EXPECT_LE(dropped, 3);
  api.release.Notify();
  ASSERT_TRUE(recorder.Flush(absl::Seconds(20)));
  EXPECT_EQ(static_cast<int64_t>(api.Reasons().size()), 5 - dropped);
  EXPECT_EQ(api.Reasons().front(), "E0");
}

}  // namespace
}  // namespace kubetrain::controller
