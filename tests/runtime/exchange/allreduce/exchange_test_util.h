// Runs AllreduceExchange ranks as threads of one process on loopback, for
// tests of its backends: every rank starts from rank 0's parameters, takes
// `steps` steps of known gradients (multiples of 1/4, so every sum is exact),
// handing them over in buckets as a backward pass would, and finishes; its
// tensors live on the device the test gives it (host memory without one).
#ifndef KUBETRAIN_TESTS_RUNTIME_EXCHANGE_ALLREDUCE_EXCHANGE_TEST_UTIL_H_
#define KUBETRAIN_TESTS_RUNTIME_EXCHANGE_ALLREDUCE_EXCHANGE_TEST_UTIL_H_

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/exchange/allreduce/allreduce_exchange.h"
#include "runtime/exchange/allreduce/device_collective.h"
#include "runtime/exchange/allreduce/ring_allreduce.h"
#include "runtime/launcher/loopback_ports.h"
#include "runtime/tensor/compute_device.h"

namespace kubetrain::allreduce::testing_util {

inline RealClock& ExchangeTestClock() {
  static RealClock clock;
  return clock;
}

inline optim::LrSchedule ConstantLr(float lr) {
  optim::LrScheduleOptions o;
  o.kind = "constant";
  o.base_lr = lr;
  return *optim::LrSchedule::Create(o);
}

inline AllreduceExchangeOptions RankOptions(int world, int rank, int port) {
  AllreduceExchangeOptions o;
  o.rank = rank;
  for (int i = 0; i < world; ++i) o.names.push_back(absl::StrCat("worker-", i));
  o.rendezvous_address = absl::StrCat("127.0.0.1:", port);
  o.rendezvous_listen_address = absl::StrCat("127.0.0.1:", port);
  o.data_listen_host = "127.0.0.1";
  o.data_advertise_host = "127.0.0.1";
  o.token = "job-token";
  o.rendezvous_timeout_seconds = 30;
  o.heartbeat_seconds = 0.05;
  o.optimizer.kind = "sgd";
  o.optimizer.momentum = 0.9f;
  return o;
}

// Gradient of rank r at step s.
inline float RankGrad(int r, int step, int64_t i) {
  return static_cast<float>(((i * 5 + r * 3 + step) % 13) - 6) * 0.25f;
}

struct RankResult {
  absl::Status status;
  std::vector<float> params;  // host copy of the final parameters
  std::string name;           // the exchange's name() after Start
  std::vector<std::string> log;
  bool Logged(const std::string& part) const {
    for (const std::string& l : log) {
      if (l.find(part) != std::string::npos) return true;
    }
    return false;
  }
};

struct RankRunOptions {
  int world = 2;
  int64_t n = 1003;
  int steps = 5;
  // Rank r's tensors live on devices[r] (borrowed); nullptr or missing:
  // host memory.
  std::vector<ComputeDevice*> devices;
  std::function<void(int rank, AllreduceExchangeOptions&)> customize;
  // Called on rank r's thread after each of its steps.
  std::function<void(int rank, int step)> after_step;
  // Called on rank r's thread after its last step, before Finish, with its
  // exchange and parameters (in the device's memory when it has one).
  std::function<void(int rank, AllreduceExchange& ex, std::span<const float> params)> before_finish;
};

inline std::vector<RankResult> RunRanks(const RankRunOptions& run) {
  absl::StatusOr<std::vector<int>> ports = launcher::AllocateLoopbackPorts(1);
  EXPECT_TRUE(ports.ok()) << ports.status();
  const int port = ports.ok() ? (*ports)[0] : 0;
  const int64_t n = run.n;
  std::vector<RankResult> out(static_cast<size_t>(run.world));
  std::vector<std::thread> threads;
  for (int r = 0; r < run.world; ++r) {
    threads.emplace_back([&, r] {
      RankResult& res = out[static_cast<size_t>(r)];
      std::mutex log_mu;
      AllreduceExchangeOptions o = RankOptions(run.world, r, port);
      o.bucket_bytes = 400;  // 100 floats a bucket
      o.chunk_bytes = 64;
      ComputeDevice* device = static_cast<size_t>(r) < run.devices.size()
                                  ? run.devices[static_cast<size_t>(r)]
                                  : nullptr;
      o.device = device;
      if (run.customize) run.customize(r, o);
      AllreduceExchange ex(o, ConstantLr(0.1f), ExchangeTestClock(), [&](const std::string& l) {
        std::lock_guard<std::mutex> g(log_mu);
        res.log.push_back(l);
      });
      // Parameters and gradients where the model would keep them.
      std::vector<float> host_p(static_cast<size_t>(n)), host_g(static_cast<size_t>(n));
      DeviceBuffer dev_p, dev_g;
      float* p = host_p.data();
      float* g = host_g.data();
      if (device != nullptr) {
        dev_p = *device->Allocate(static_cast<size_t>(n) * sizeof(float));
        dev_g = *device->Allocate(static_cast<size_t>(n) * sizeof(float));
        p = dev_p.data();
        g = dev_g.data();
      }
      auto upload = [&](const std::vector<float>& from, float* to) {
        if (device != nullptr) device->CopyToDevice(from.data(), to, from.size() * sizeof(float));
      };
      // Only rank 0's initial values may survive Start.
      for (int64_t i = 0; i < n; ++i) {
        host_p[static_cast<size_t>(i)] = r == 0 ? 0.01f * static_cast<float>(i % 7) : 99.0f;
      }
      upload(host_p, p);
      absl::StatusOr<int64_t> start = ex.Start(std::span<float>(p, static_cast<size_t>(n)));
      res.name = ex.name();
      if (!start.ok()) {
        res.status = start.status();
        return;
      }
      const std::span<const float> grads(g, static_cast<size_t>(n));
      for (int s = 0; s < run.steps; ++s) {
        for (int64_t i = 0; i < n; ++i) host_g[static_cast<size_t>(i)] = RankGrad(r, s, i);
        upload(host_g, g);
        // Backward hands buckets over from the end of the buffer.
        for (int64_t from = n - 250; from > 0; from -= 250) ex.GradientsReady(grads, from);
        absl::StatusOr<int64_t> next =
            ex.Step(s, grads, std::span<float>(p, static_cast<size_t>(n)));
        if (!next.ok()) {
          res.status = next.status();
          return;
        }
        if (run.after_step) run.after_step(r, s);
      }
      if (run.before_finish)
        run.before_finish(r, ex, std::span<const float>(p, static_cast<size_t>(n)));
      res.status = ex.Finish();
      if (device != nullptr) {
        absl::Status c = device->CopyToHost(p, host_p.data(), host_p.size() * sizeof(float));
        if (res.status.ok()) res.status = c;
      }
      res.params = host_p;
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

// One optimizer (rank options' SGD, lr 0.1) on the averaged gradient, from
// rank 0's starting values: what every rank must hold after `steps` steps.
inline std::vector<float> OneOptimizerOnTheMean(int world, int64_t n, int steps) {
  std::vector<float> ref(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ref[static_cast<size_t>(i)] = 0.01f * static_cast<float>(i % 7);
  auto opt = *optim::MakeOptimizer(RankOptions(world, 0, 0).optimizer, static_cast<size_t>(n));
  std::vector<float> sum(static_cast<size_t>(n));
  for (int s = 0; s < steps; ++s) {
    for (int64_t i = 0; i < n; ++i) {
      float total = 0;
      for (int r = 0; r < world; ++r) total += RankGrad(r, s, i);
      sum[static_cast<size_t>(i)] = total;
    }
    opt->Apply(ref, sum, 0.1f, 1.0f / static_cast<float>(world));
  }
  return ref;
}

// Stands in for NCCL where the CPU can read the "device" memory (a
// FakeDevice's): a DeviceCollective whose collectives run at once on an
// in-process TCP ring (ring_test_util.h's MakeRing).
class RingBackedDeviceCollective final : public DeviceCollective {
 public:
  // `waits` (when given, owned by the test: the collective goes with its
  // exchange) counts the WaitJoined calls.
  explicit RingBackedDeviceCollective(std::unique_ptr<RingAllreduce> ring,
                                      std::atomic<int64_t>* waits = nullptr)
      : ring_(std::move(ring)), waits_(waits != nullptr ? waits : &own_waits_) {}
  std::string name() const override { return "ring-backed"; }
  absl::Status AllreduceSum(const float* in, float* out, int64_t n,
                            const exchange::IoCheck&) override {
    if (in != out) std::copy(in, in + n, out);
    return ring_->AllreduceSum(std::span<float>(out, static_cast<size_t>(n)), nullptr);
  }
  absl::Status Broadcast(float* data, int64_t n, int root, const exchange::IoCheck&) override {
    return ring_->Broadcast(std::span<float>(data, static_cast<size_t>(n)), root, nullptr);
  }
  absl::StatusOr<int64_t> Join() override { return ++joins_; }
  absl::Status WaitJoined(int64_t join, const exchange::IoCheck& check) override {
    if (join > joins_) return absl::FailedPreconditionError("a join from the future");
    ++*waits_;
    return check ? check() : absl::OkStatus();
  }
  int64_t bytes() const override { return ring_->bytes_sent(); }
  void Shutdown() override { ring_->Shutdown(); }

 private:
  std::unique_ptr<RingAllreduce> ring_;
  int64_t joins_ = 0;
  std::atomic<int64_t> own_waits_{0};
  std::atomic<int64_t>* waits_;
};

}  // namespace kubetrain::allreduce::testing_util

#endif  // KUBETRAIN_TESTS_RUNTIME_EXCHANGE_ALLREDUCE_EXCHANGE_TEST_UTIL_H_
