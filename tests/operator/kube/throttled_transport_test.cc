// The client-side rate limit on a FakeClock: the burst goes at once, the
// rest one per 1/qps of clock time, watches take a token, qps 0 is no limit,
// a shutdown drops the waiting, bad flags are refused.
#include "operator/kube/throttled_transport.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/fake_http_transport.h"
#include "tests/support/wait_for.h"

namespace kubetrain::kube {
namespace {

using ::testing::HasSubstr;

struct Throttled {
  FakeClock clock;
  FakeHttpTransport* fake = nullptr;
  std::unique_ptr<ThrottledTransport> transport;

  explicit Throttled(ThrottleOptions options) {
    auto inner = std::make_unique<FakeHttpTransport>();
    fake = inner.get();
    fake->OnSend([](const HttpRequest&) -> absl::StatusOr<HttpResponse> {
      return HttpResponse{200, "{}", ""};
    });
    fake->OnStream([](const HttpRequest&) -> absl::StatusOr<StreamResponse> {
      StreamResponse r;
      r.status = 200;
      r.stream = std::make_unique<ScriptedStream>(std::vector<std::string>{}, absl::OkStatus());
      return r;
    });
    transport = std::make_unique<ThrottledTransport>(std::move(inner), options, clock);
  }
  size_t sent() const { return fake->Requests().size(); }
  void AdvanceMillis(int ms) { clock.Advance(int64_t{ms} * 1000000); }
};

const HttpRequest kGet{"GET", "/api/v1/pods", "", ""};

bool WaitFor(const std::function<bool()>& condition) {
  return testing_util::WaitFor(condition, absl::Seconds(20), absl::Milliseconds(1));
}

TEST(ThrottledTransport, BurstGoesAtOnceThenOnePerInterval) {
  Throttled t({.qps = 10, .burst = 3});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(t.transport->Send(kGet).ok());
  EXPECT_EQ(t.sent(), 3u);
  EXPECT_EQ(t.transport->throttled(), 0);

  // Two more from other threads: they wait for the clock.
  std::vector<std::thread> senders;
  for (int i = 0; i < 2; ++i) senders.emplace_back([&] { (void)t.transport->Send(kGet); });
  ASSERT_TRUE(WaitFor([&] { return t.transport->throttled() == 2; }));
  EXPECT_EQ(t.sent(), 3u);  // no token until the clock moves
  t.AdvanceMillis(99);
  EXPECT_EQ(t.sent(), 3u);  // 0.99 of a token
  t.AdvanceMillis(1);
  ASSERT_TRUE(WaitFor([&] { return t.sent() == 4u; }));
  t.AdvanceMillis(100);
  ASSERT_TRUE(WaitFor([&] { return t.sent() == 5u; }));
  for (std::thread& s : senders) s.join();
  EXPECT_EQ(t.transport->waited(), absl::Milliseconds(300));  // 100 + 200 reserved
}

TEST(ThrottledTransport, IdleTimeRefillsUpToTheBurstOnly) {
  Throttled t({.qps = 10, .burst = 2});
  ASSERT_TRUE(t.transport->Send(kGet).ok());
  ASSERT_TRUE(t.transport->Send(kGet).ok());
  t.AdvanceMillis(10000);  // 100 tokens' worth, capped at 2
  ASSERT_TRUE(t.transport->Send(kGet).ok());
  ASSERT_TRUE(t.transport->Send(kGet).ok());
  EXPECT_EQ(t.transport->throttled(), 0);
  std::thread third([&] { (void)t.transport->Send(kGet); });
  ASSERT_TRUE(WaitFor([&] { return t.transport->throttled() == 1; }));
  t.AdvanceMillis(100);
  third.join();
  EXPECT_EQ(t.sent(), 5u);
}

TEST(ThrottledTransport, WatchesTakeATokenToo) {
  Throttled t({.qps = 1, .burst = 1});
  ASSERT_TRUE(t.transport->OpenStream(kGet, absl::Seconds(1)).ok());
  std::thread get([&] { (void)t.transport->Send(kGet); });
  ASSERT_TRUE(WaitFor([&] { return t.transport->throttled() == 1; }));
  EXPECT_EQ(t.sent(), 1u);
  t.AdvanceMillis(1000);
  get.join();
  EXPECT_EQ(t.sent(), 2u);
}

// Shutting down: requests waiting for their turn give up at once
// (Cancelled, nothing sent), and later ones (the Lease's release) go
// without waiting; the clock never moves.
TEST(ThrottledTransport, InterruptDropsTheWaitingAndStopsThrottling) {
  Throttled t({.qps = 1, .burst = 1});
  ASSERT_TRUE(t.transport->Send(kGet).ok());
  std::vector<absl::Status> waited(3);
  std::vector<std::thread> senders;
  for (int i = 0; i < 3; ++i) {
    senders.emplace_back([&, i] { waited[i] = t.transport->Send(kGet).status(); });
  }
  ASSERT_TRUE(WaitFor([&] { return t.transport->throttled() == 3; }));
  t.transport->Interrupt();
  for (auto& s : senders) s.join();
  for (const absl::Status& s : waited) EXPECT_TRUE(absl::IsCancelled(s)) << s;
  EXPECT_EQ(t.sent(), 1u);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(t.transport->Send(kGet).ok());
  EXPECT_EQ(t.sent(), 6u);
  EXPECT_EQ(t.transport->throttled(), 3);
}

TEST(ThrottledTransport, ZeroQpsIsNoLimit) {
  Throttled t({.qps = 0, .burst = 0});
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(t.transport->Send(kGet).ok());
  EXPECT_EQ(t.transport->throttled(), 0);
}

TEST(ThrottledTransport, OptionsAreValidated) {
  EXPECT_TRUE(ValidateThrottleOptions({.qps = 20, .burst = 30}).ok());
  EXPECT_TRUE(ValidateThrottleOptions({.qps = 0, .burst = 0}).ok());
  EXPECT_THAT(std::string(ValidateThrottleOptions({.qps = -1, .burst = 1}).message()),
              HasSubstr("--kube-api-qps"));
  EXPECT_THAT(std::string(ValidateThrottleOptions({.qps = 5, .burst = 0}).message()),
              HasSubstr("--kube-api-burst: must be at least 1"));
}

}  // namespace
}  // namespace kubetrain::kube
