#include "runtime/exchange/staged_exchange.h"

#include <vector>

#include "gtest/gtest.h"
#include "tests/support/fake_device.h"

namespace kubetrain::exchange {
namespace {

// A host exchange that records what it was given and answers with
// parameters of its own.
class HostExchange : public Exchange {
 public:
  explicit HostExchange(bool early = true) : early_(early) {}
  std::string name() const override { return "host"; }
  bool TakesGradientsEarly() const override { return early_; }
  absl::StatusOr<int64_t> Start(std::span<float> params) override {
    started_with.assign(params.begin(), params.end());
    for (float& p : params) p = 1.0f;  // the shared starting point
    return 5;
  }
  void GradientsReady(std::span<const float> grads, int64_t ready_from) override {
    // What the host copy holds for the ready range when it is announced.
    ready.push_back({ready_from, std::vector<float>(grads.begin() + ready_from, grads.end())});
  }
  absl::StatusOr<int64_t> Step(int64_t step, std::span<const float> grads,
                               std::span<float> params) override {
    stepped_with.assign(grads.begin(), grads.end());
    for (size_t i = 0; i < params.size(); ++i) params[i] -= grads[i];
    return step + 1;
  }
  absl::Status Finish() override { return absl::OkStatus(); }

  std::vector<float> started_with, stepped_with;
  std::vector<std::pair<int64_t, std::vector<float>>> ready;

 private:
  const bool early_;
};

TEST(StagedExchange, StagesGradientsThroughTheHostAndUploadsParameters) {
  testing::FakeDevice device;
  HostExchange host;
  const int64_t n = 6;
  DeviceBuffer params = *device.Allocate(n * sizeof(float));
  DeviceBuffer grads = *device.Allocate(n * sizeof(float));
  for (int64_t i = 0; i < n; ++i) params.data()[i] = 10.0f + i;
  std::unique_ptr<StagedExchange> staged = *StagedExchange::Create(host, device, n);
  EXPECT_EQ(staged->name(), "host");

  absl::StatusOr<int64_t> start = staged->Start(params.span());
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_EQ(*start, 5);
  EXPECT_EQ(host.started_with, (std::vector<float>{10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(std::vector<float>(params.data(), params.data() + n), std::vector<float>(n, 1.0f));

  // Backward finishes the tail first: the inner exchange sees the staged
  // values of each range as it is announced.
  for (int64_t i = 0; i < n; ++i) grads.data()[i] = 0.5f * static_cast<float>(i);
  staged->GradientsReady(grads.span(), 4);
  staged->GradientsReady(grads.span(), 1);
  ASSERT_EQ(host.ready.size(), 2u);
  EXPECT_EQ(host.ready[0].second, (std::vector<float>{2.0f, 2.5f}));
  EXPECT_EQ(host.ready[1].second, (std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f, 2.5f}));

  absl::StatusOr<int64_t> next = staged->Step(5, grads.span(), params.span());
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, 6);
  EXPECT_EQ(host.stepped_with, (std::vector<float>{0, 0.5f, 1, 1.5f, 2, 2.5f}));
  EXPECT_EQ(std::vector<float>(params.data(), params.data() + n),
            (std::vector<float>{1, 0.5f, 0, -0.5f, -1, -1.5f}));

  // The next step stages everything again.
  for (int64_t i = 0; i < n; ++i) grads.data()[i] = 1.0f;
  ASSERT_TRUE(staged->Step(6, grads.span(), params.span()).ok());
  EXPECT_EQ(host.stepped_with, std::vector<float>(n, 1.0f));
}

// An inner exchange that needs the whole gradient (the PS client): backward's
// ranges are only queued for copying, and a step waits once, for all of
// them, before the inner exchange reads them; the parameters go back as a
// queued copy, with no wait of the device's queue in any step.
TEST(StagedExchange, AStepWaitsOnceForItsQueuedCopies) {
  testing::FakeDevice device;
  HostExchange host(/*early=*/false);
  const int64_t n = 6;
  DeviceBuffer params = *device.Allocate(n * sizeof(float));
  DeviceBuffer grads = *device.Allocate(n * sizeof(float));
  std::unique_ptr<StagedExchange> staged = *StagedExchange::Create(host, device, n);
  ASSERT_TRUE(staged->Start(params.span()).ok());
  const int waits = device.waits(), events = device.event_waits();
  for (int step = 0; step < 3; ++step) {
    for (int64_t i = 0; i < n; ++i) grads.data()[i] = static_cast<float>(step + i);
    staged->GradientsReady(grads.span(), 4);
    staged->GradientsReady(grads.span(), 2);
    EXPECT_EQ(device.event_waits(), events + step) << "no wait while backward runs";
    ASSERT_TRUE(staged->Step(5 + step, grads.span(), params.span()).ok());
    EXPECT_EQ(device.event_waits(), events + step + 1) << "one wait a step";
    EXPECT_EQ(host.stepped_with, std::vector<float>(grads.data(), grads.data() + n));
  }
  EXPECT_TRUE(host.ready.empty()) << "the inner exchange takes no early ranges";
  EXPECT_EQ(device.waits(), waits) << "nothing waits for the device's whole queue";
  // Start's 1s, less the three steps' gradients (0 + 1 + 2 + 3 * i).
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(params.data()[i], 1.0f - (3.0f + 3.0f * i));
}

TEST(StagedExchange, RefusesASizeMismatch) {
  testing::FakeDevice device;
  HostExchange host;
  std::unique_ptr<StagedExchange> staged = *StagedExchange::Create(host, device, 4);
  std::vector<float> p(3), g(3);
  EXPECT_TRUE(absl::IsInvalidArgument(staged->Start(p).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(staged->Step(0, g, p).status()));
}

}  // namespace
}  // namespace kubetrain::exchange
