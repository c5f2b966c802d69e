// A worker's step transports against shards on loopback: the exchange's
// one ordered choice (the TCP data plane when the shard offers it, it
// answers and --ps-data-plane allows it; else gRPC), and each transport's
// steps giving the same parameters, bit for bit, and failing with the same
// typed errors.
#include "runtime/exchange/ps/step_transport.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/exchange/ps/grpc_shard_server.h"
#include "runtime/exchange/ps/grpc_step_transport.h"
#include "runtime/exchange/ps/ps_exchange.h"
#include "runtime/exchange/ps/ps_refusal.h"
#include "runtime/exchange/ps/shard_client.h"
#include "runtime/exchange/ps/shard_session.h"
#include "runtime/exchange/ps/tcp_shard_server.h"
#include "runtime/exchange/ps/tcp_step_transport.h"
#include "runtime/exchange/tcp_link.h"
#include "testing/loopback_shard.h"

namespace kubetrain::ps {
namespace {

constexpr int64_t kParams = 300000;  // several data-plane pieces and gRPC chunks

// A port nobody listens on: bound, learnt, closed.
int ClosedPort() {
  absl::StatusOr<exchange::TcpListener> l = exchange::TcpListener::Listen("127.0.0.1", 0);
  EXPECT_TRUE(l.ok()) << l.status();
  return l.ok() ? l->port() : 1;
}

// The exchange's log lines; its shards log from threads of their own.
class Logs {
 public:
  PsExchange::Logger logger() {
    return [this](const std::string& line) {
      absl::MutexLock lock(&mu_);
      lines_.push_back(line);
    };
  }
  // Lines containing `part`.
  int Count(const std::string& part) const {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(std::count_if(lines_.begin(), lines_.end(), [&](const std::string& l) {
      return absl::StrContains(l, part);
    }));
  }
  std::string All() const {
    absl::MutexLock lock(&mu_);
    return testing::PrintToString(lines_);
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

// One worker's Start and three steps through a PsExchange, which it
// returns finished.
std::unique_ptr<PsExchange> ThreeSteps(LoopbackShard& s, bool data_plane, Logs& logs) {
  static RealClock clock;
  PsExchangeOptions o;
  o.ps_addresses = {s.address()};
  o.initializer = true;
  o.mode = *ExchangeMode::Parse("sync");
  o.token = "t";
  o.data_plane = data_plane;
  o.peer_timeout_seconds = 10;
  o.total_steps = 10;
  auto w = std::make_unique<PsExchange>(o, clock, logs.logger());
  std::vector<float> p(kParams), g(kParams);
  for (int64_t i = 0; i < kParams; ++i) p[i] = static_cast<float>(i % 101) * 0.25f;
  absl::StatusOr<int64_t> next = w->Start(p);
  EXPECT_TRUE(next.ok()) << next.status();
  for (int64_t step = 0; step < 3 && next.ok(); ++step) {
    for (int64_t i = 0; i < kParams; ++i) g[i] = static_cast<float>((i + step) % 17) * 0.01f;
    next = w->Step(*next, g, p);
    EXPECT_TRUE(next.ok()) << next.status();
  }
  EXPECT_TRUE(w->Finish().ok());
  return w;
}

TEST(StepTransportChoice, TheDataPlaneWhenTheShardOffersItAndItAnswers) {
  LoopbackShard s("sync", "t", /*tcp=*/true, -1, true, /*num_workers=*/1);
  Logs logs;
  std::unique_ptr<PsExchange> w = ThreeSteps(s, /*data_plane=*/true, logs);
  EXPECT_EQ(w->transport(0), StepTransportKind::kTcpDataPlane);
  EXPECT_EQ(s.shard().Status().applied_pushes(), 3);
  EXPECT_EQ(logs.Count("ps-0: exchanging over the data plane at 127.0.0.1:"), 1)
      << "the choice is logged once: " << logs.All();
  EXPECT_EQ(logs.Count("gRPC"), 0) << logs.All();
}

TEST(StepTransportChoice, GrpcWhenTheShardOffersNoDataPlane) {
  LoopbackShard s("sync", "t", /*tcp=*/false, -1, true, /*num_workers=*/1);
  Logs logs;
  std::unique_ptr<PsExchange> w = ThreeSteps(s, /*data_plane=*/true, logs);
  EXPECT_EQ(w->transport(0), StepTransportKind::kGrpcStream);
  EXPECT_EQ(s.shard().Status().applied_pushes(), 3);
  EXPECT_EQ(logs.Count("ps-0: exchanging over gRPC"), 1) << logs.All();
  EXPECT_EQ(logs.Count("data plane"), 0) << logs.All();
}

// --ps-data-plane grpc on the worker: the shard's offer is not taken.
TEST(StepTransportChoice, GrpcWhenTheWorkerIsToldGrpc) {
  LoopbackShard s("sync", "t", /*tcp=*/true, -1, true, /*num_workers=*/1);
  Logs logs;
  std::unique_ptr<PsExchange> w = ThreeSteps(s, /*data_plane=*/false, logs);
  EXPECT_EQ(w->transport(0), StepTransportKind::kGrpcStream);
  EXPECT_EQ(s.shard().Status().applied_pushes(), 3);
  EXPECT_EQ(logs.Count("ps-0: exchanging over gRPC"), 1) << logs.All();
  EXPECT_EQ(logs.Count("data plane"), 0) << logs.All();
}

// An offered port that cannot be reached (a network policy admitting only
// the gRPC port, say) is given up on the first step, which gRPC then
// carries at once: no lost shard, no backoff, and no second try.
TEST(StepTransportChoice, AnUnreachableDataPortHandsTheStepToGrpcAtOnce) {
  LoopbackShard s("sync", "t", /*tcp=*/false, /*advertise=*/ClosedPort(), true, 1);
  Logs logs;
  std::unique_ptr<PsExchange> w = ThreeSteps(s, /*data_plane=*/true, logs);
  EXPECT_EQ(w->transport(0), StepTransportKind::kGrpcStream);
  EXPECT_EQ(s.shard().Status().applied_pushes(), 3);
  EXPECT_EQ(logs.Count("unreachable"), 1) << logs.All();
  EXPECT_EQ(logs.Count("ps-0: exchanging over gRPC instead"), 1) << logs.All();
  EXPECT_EQ(logs.Count("lost "), 0) << logs.All();
}

// The same steps on each transport, from the same parameters, against a
// fresh shard each: the same parameters and replies, bit for bit.
struct StepsResult {
  std::vector<float> params;
  std::vector<int64_t> global_steps;
};

enum class Way { kGrpc, kTcp, kTcpPipelined };

StepsResult StepsOver(Way way, v1::WireDType dtype) {
  LoopbackShard s("sync", "t", /*tcp=*/way != Way::kGrpc, -1, true, /*num_workers=*/1,
                  /*pipeline=*/way == Way::kTcpPipelined);
  ShardClient c("ps-0", s.address(), "t");
  std::unique_ptr<StepTransport> t;
  if (way == Way::kGrpc) {
    t = std::make_unique<GrpcStepTransport>(c);
  } else {
    t = std::make_unique<TcpStepTransport>(c);
  }
  v1::RegisterRequest reg;
  reg.set_worker(0);
  reg.set_num_params(kParams);
  absl::StatusOr<v1::RegisterResponse> r = c.Register(reg, std::chrono::seconds(5));
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  t->Offer(*r);
  EXPECT_TRUE(t->CanCarry(dtype));
  EXPECT_EQ(r->data_plane_pipeline(), way == Way::kTcpPipelined);
  StepsResult out;
  out.params.resize(kParams);
  std::vector<float> g(kParams);
  for (int64_t i = 0; i < kParams; ++i) out.params[i] = static_cast<float>(i % 89) * 0.125f;
  v1::PushHeader h;
  h.set_worker(0);
  h.set_incarnation(r->incarnation());
  h.set_total_steps(10);
  EXPECT_TRUE(c.Initialize(h, out.params, 0, dtype).ok());
  for (int64_t step = 0; step < 4; ++step) {
    for (int64_t i = 0; i < kParams; ++i) {
      g[i] = static_cast<float>((i * 7 + step) % 13) * 0.01f - 0.05f;
    }
    h.set_step(step);
    v1::PullRequest pull;
    pull.set_worker(0);
    pull.set_incarnation(r->incarnation());
    pull.set_dtype(dtype);
    pull.set_min_step(step + 1);
    pull.set_clock(step + 1);
    bool pushed = false, written = false;
    absl::StatusOr<PullReply> reply =
        t->Step(h, g, pull, out.params, 0, dtype, &pushed, [&] { written = true; });
    EXPECT_TRUE(reply.ok()) << reply.status();
    if (!reply.ok()) return {};
    EXPECT_TRUE(pushed);
    EXPECT_TRUE(written);
    EXPECT_EQ(reply->incarnation, r->incarnation());
    out.global_steps.push_back(reply->global_step);
  }
  t->Close();
  return out;
}

TEST(StepTransports, EachGivesTheSameParameters) {
  for (v1::WireDType dtype : {v1::WIRE_DTYPE_F32, v1::WIRE_DTYPE_F16}) {
    const StepsResult grpc = StepsOver(Way::kGrpc, dtype);
    ASSERT_EQ(grpc.global_steps, (std::vector<int64_t>{1, 2, 3, 4})) << "dtype " << dtype;
    const StepsResult tcp = StepsOver(Way::kTcp, dtype);
    const StepsResult piped = StepsOver(Way::kTcpPipelined, dtype);
    EXPECT_EQ(tcp.global_steps, grpc.global_steps);
    EXPECT_EQ(piped.global_steps, grpc.global_steps);
    EXPECT_TRUE(tcp.params == grpc.params) << "dtype " << dtype;
    EXPECT_TRUE(piped.params == grpc.params) << "dtype " << dtype;
  }
}

// Every transport reports a shard without parameters, a restarted shard,
// a refused step and a shard gone away as the same StepError.
TEST(StepTransports, FailWithTheSameTypedErrors) {
  for (bool tcp : {false, true}) {
    SCOPED_TRACE(tcp ? "tcp" : "grpc");
    LoopbackShard s("sync", "t", /*tcp=*/tcp, -1, true, /*num_workers=*/1);
    ShardClient c("ps-0", s.address(), "t");
    std::unique_ptr<StepTransport> t;
    if (tcp) {
      t = std::make_unique<TcpStepTransport>(c);
    } else {
      t = std::make_unique<GrpcStepTransport>(c);
    }
    v1::RegisterRequest reg;
    reg.set_worker(0);
    reg.set_num_params(kParams);
    absl::StatusOr<v1::RegisterResponse> r = c.Register(reg, std::chrono::seconds(5));
    ASSERT_TRUE(r.ok()) << r.status();
    t->Offer(*r);
    ASSERT_TRUE(t->CanCarry(v1::WIRE_DTYPE_F32));
    const uint64_t inc = r->incarnation();
    std::vector<float> params(kParams, 1.0f), g(kParams, 0.5f);
    auto step = [&](uint64_t incarnation, size_t values) {
      v1::PushHeader h;
      h.set_worker(0);
      h.set_incarnation(incarnation);
      v1::PullRequest pull;
      pull.set_worker(0);
      pull.set_incarnation(incarnation);
      pull.set_min_step(1);
      pull.set_clock(1);
      bool pushed = false;
      return t
          ->Step(h, std::span<const float>(g).first(values), pull,
                 std::span<float>(params).first(values), 0, v1::WIRE_DTYPE_F32, &pushed, {})
          .status();
    };
    EXPECT_EQ(StepErrorOf(step(inc, kParams)), StepError::kUninitialised);
    v1::PushHeader h;
    h.set_worker(0);
    h.set_incarnation(inc);
    ASSERT_TRUE(c.Initialize(h, params, 0, v1::WIRE_DTYPE_F32).ok());
    EXPECT_EQ(StepErrorOf(step(inc + 1, kParams)), StepError::kShardRestarted);
    EXPECT_EQ(StepErrorOf(step(inc, kParams - 16)), StepError::kRefused);
    EXPECT_EQ(s.shard().Status().applied_pushes(), 0);
    EXPECT_TRUE(step(inc, kParams).ok()) << "the next step works";
    EXPECT_EQ(s.shard().Status().applied_pushes(), 1);
    s.StopServing();
    EXPECT_EQ(StepErrorOf(step(inc, kParams)), StepError::kUnavailable);
    EXPECT_TRUE(t->CanCarry(v1::WIRE_DTYPE_F32))
        << "a port once reached is not given up when its shard goes away";
  }
}

}  // namespace
}  // namespace kubetrain::ps
