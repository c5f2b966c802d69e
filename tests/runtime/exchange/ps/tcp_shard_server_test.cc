// The parameter server's direct TCP data plane on loopback: workers train
// over it exactly as over gRPC; a wrong token, a corrupt, wrong-sized or
// half-sent push and a stranger's bytes are refused, counted and commit
// nothing; an unreachable data port falls back to gRPC; Stop() frees a
// worker waiting at the sync barrier, and a step waiting on a shard that
// restarted behind a silent connection ends soon. Also the wire format's checks.
#include "runtime/exchange/ps/tcp_shard_server.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/crc32c.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/exchange/ps/grpc_shard_server.h"
#include "runtime/exchange/ps/ps_exchange.h"
#include "runtime/exchange/ps/ps_refusal.h"
#include "runtime/exchange/ps/shard_client.h"
#include "runtime/exchange/ps/shard_session.h"
#include "runtime/exchange/ps/tcp_step_transport.h"
#include "runtime/exchange/ps/tcp_wire_format.h"
#include "runtime/exchange/tcp_link.h"
#include "testing/loopback_shard.h"
#include "tests/support/wait_for.h"

namespace kubetrain::ps {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace wire = data_plane;

constexpr int64_t kParams = 300000;  // more than one 256 KiB piece each way
constexpr uint64_t kIncarnation = LoopbackShard::kIncarnation;
using Shard = LoopbackShard;

PsExchangeOptions Options(const Shard& s, int worker, const std::string& mode,
                          const std::string& token, v1::WireDType dtype = v1::WIRE_DTYPE_F32) {
  PsExchangeOptions o;
  o.ps_addresses = {s.address()};
  o.worker = worker;
  o.worker_name = "worker-" + std::to_string(worker);
  o.initializer = worker == 0;
  o.mode = *ExchangeMode::Parse(mode);
  o.token = token;
  o.peer_timeout_seconds = 10;
  o.total_steps = 10;
  o.wire_dtype = dtype;
  return o;
}

// Two workers, five sync steps of different gradients; returns worker 0's
// parameters and gathers both workers' log lines.
std::vector<float> TrainTwoWorkers(Shard& s, std::vector<std::string>* logs,
                                   v1::WireDType dtype = v1::WIRE_DTYPE_F32, int64_t n = kParams) {
  RealClock clock;
  std::mutex mu;
  auto log = [&](const std::string& l) {
    std::lock_guard<std::mutex> lock(mu);
    logs->push_back(l);
  };
  PsExchange w0(Options(s, 0, "sync", "t", dtype), clock, log);
  PsExchange w1(Options(s, 1, "sync", "t", dtype), clock, log);
  std::vector<float> p0(n), p1(n, -1.0f), g0(n), g1(n);
  for (int64_t i = 0; i < n; ++i) p0[i] = static_cast<float>(i % 97) * 0.25f;
  absl::StatusOr<int64_t> s1;
  std::thread t([&] { s1 = w1.Start(p1); });
  EXPECT_EQ(*w0.Start(p0), 0);
  t.join();
  EXPECT_TRUE(s1.ok()) << s1.status();
  for (int64_t step = 0; step < 5; ++step) {
    for (int64_t i = 0; i < n; ++i) {
      g0[i] = static_cast<float>((i + step) % 13) * 0.01f;
      g1[i] = static_cast<float>((i * 7 + step) % 11) * -0.02f;
    }
    absl::StatusOr<int64_t> n1;
    std::thread t2([&] { n1 = w1.Step(step, g1, p1); });
    absl::StatusOr<int64_t> n0 = w0.Step(step, g0, p0);
    t2.join();
    EXPECT_TRUE(n0.ok()) << n0.status();
    EXPECT_TRUE(n1.ok()) << n1.status();
  }
  EXPECT_EQ(p0, p1);
  EXPECT_TRUE(w0.Finish().ok());
  EXPECT_TRUE(w1.Finish().ok());
  return p0;
}

TEST(PsDataPlaneTest, WorkersTrainOverItAsOverGrpc) {
  std::vector<std::string> tcp_logs, grpc_logs;
  std::vector<float> over_tcp, over_grpc;
  {
    Shard s("sync", "t", /*tcp=*/true);
    over_tcp = TrainTwoWorkers(s, &tcp_logs);
    EXPECT_EQ(s.shard().Status().applied_pushes(), 5);  // sync: one update per step
    EXPECT_EQ(s.shard().Status().rejected_pushes(), 0);
  }
  {
    Shard s("sync", "t", /*tcp=*/false);
    over_grpc = TrainTwoWorkers(s, &grpc_logs);
  }
  EXPECT_EQ(over_tcp, over_grpc);  // bit for bit
  EXPECT_THAT(testing::PrintToString(tcp_logs), HasSubstr("exchanging over the data plane"));
  EXPECT_THAT(testing::PrintToString(grpc_logs), ::testing::Not(HasSubstr("data plane")));
}

// fp16 on the wire (--wire-dtype fp16): the data plane narrows and widens
// as gRPC does, so the two end bit for bit equal too.
TEST(PsDataPlaneTest, Fp16StepsGoOverItAsOverGrpc) {
  std::vector<std::string> tcp_logs, grpc_logs;
  std::vector<float> over_tcp, over_grpc, fp32;
  {
    Shard s("sync", "t", /*tcp=*/true);
    over_tcp = TrainTwoWorkers(s, &tcp_logs, v1::WIRE_DTYPE_F16);
    EXPECT_EQ(s.shard().Status().applied_pushes(), 5);
  }
  {
    Shard s("sync", "t", /*tcp=*/false);
    over_grpc = TrainTwoWorkers(s, &grpc_logs, v1::WIRE_DTYPE_F16);
  }
  {
    Shard s("sync", "t", /*tcp=*/true);
    std::vector<std::string> logs;
    fp32 = TrainTwoWorkers(s, &logs);
  }
  EXPECT_EQ(over_tcp, over_grpc);  // bit for bit
  EXPECT_NE(over_tcp, fp32);       // and they were narrowed
  EXPECT_THAT(testing::PrintToString(tcp_logs), HasSubstr("exchanging over the data plane"));
  EXPECT_THAT(testing::PrintToString(grpc_logs), Not(HasSubstr("exchanging over the data plane")));
}

// Async workers pull while others push, so the shard sends versions that
// overlap: it must never send bytes it is overwriting. Every update here
// adds -0.5 to every parameter (sgd, lr 0.5, gradient 1, exact in fp16), so
// each pull must be uniform and equal -0.5 x its global step; a buffer
// reused while still being sent shows up as a mixed pull or a checksum
// error.
void AsyncPullsAreWholeVersions(v1::WireDType dtype) {
  constexpr int kWorkers = 4;
  Shard s("async", "t", /*tcp=*/true, /*advertise=*/-1, /*fp16_plane=*/true, kWorkers);
  RealClock clock;
  constexpr int64_t kSteps = 50;             // 200 updates: -100 at most, exact in fp16
  constexpr int64_t kAsyncParams = 1 << 21;  // 8 MB: long sends, more overlap
  std::mutex mu;
  std::vector<std::string> logs;
  auto log = [&](const std::string& l) {
    std::lock_guard<std::mutex> lock(mu);
    logs.push_back(l);
  };
  std::vector<std::unique_ptr<PsExchange>> workers;
  for (int w = 0; w < kWorkers; ++w) {
    PsExchangeOptions o = Options(s, w, "async", "t", dtype);
    o.total_steps = kWorkers * kSteps;
    workers.push_back(std::make_unique<PsExchange>(o, clock, log));
  }
  std::vector<std::string> failures(kWorkers);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      std::vector<float> p(kAsyncParams, 0.0f);
      const std::vector<float> g(kAsyncParams, 1.0f);
      absl::StatusOr<int64_t> started = workers[w]->Start(p);
      if (!started.ok()) {
        failures[w] = started.status().ToString();
        return;
      }
      for (int64_t step = 0; step < kSteps; ++step) {
        absl::StatusOr<int64_t> next = workers[w]->Step(step, g, p);
        if (!next.ok()) {
          failures[w] = absl::StrCat("step ", step, ": ", next.status().ToString());
          return;
        }
        const int64_t global = workers[w]->global_step();  // of the pulled version
        const float want = -0.5f * static_cast<float>(global);
        for (int64_t i = 0; i < kAsyncParams; ++i) {
          if (p[i] != want) {
            failures[w] = absl::StrCat("step ", step, " at global step ", global, ": parameter ", i,
                                       " is ", p[i], ", not ", want);
            return;
          }
        }
      }
      if (absl::Status f = workers[w]->Finish(); !f.ok()) failures[w] = f.ToString();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int w = 0; w < kWorkers; ++w) EXPECT_EQ(failures[w], "") << "worker " << w;
  EXPECT_EQ(s.shard().Status().applied_pushes(), kWorkers * kSteps);
  EXPECT_EQ(s.shard().Status().rejected_pushes(), 0);
  EXPECT_THAT(testing::PrintToString(logs), HasSubstr("exchanging over the data plane"));
}

TEST(PsDataPlaneTest, AsyncFp32PullsAreWholeVersions) {
  AsyncPullsAreWholeVersions(v1::WIRE_DTYPE_F32);
}

TEST(PsDataPlaneTest, AsyncFp16PullsAreWholeVersions) {
  AsyncPullsAreWholeVersions(v1::WIRE_DTYPE_F16);
}

// A shard from before fp16 over the data plane advertises its port but not
// data_plane_fp16: it would read fp16 bytes as fp32 and wait for the rest.
// fp16 steps go to it over gRPC; fp32 steps still use its data plane.
TEST(PsDataPlaneTest, Fp16StepsToAnOlderShardGoOverGrpc) {
  std::vector<float> reference;
  {
    Shard s("sync", "t", /*tcp=*/false);
    std::vector<std::string> logs;
    reference = TrainTwoWorkers(s, &logs, v1::WIRE_DTYPE_F16);
  }
  {
    Shard s("sync", "t", /*tcp=*/true, /*advertise=*/-1, /*fp16_plane=*/false);
    std::vector<std::string> logs;
    EXPECT_EQ(TrainTwoWorkers(s, &logs, v1::WIRE_DTYPE_F16), reference);
    EXPECT_THAT(testing::PrintToString(logs), Not(HasSubstr("exchanging over the data plane")));
  }
  {
    Shard s("sync", "t", /*tcp=*/true, /*advertise=*/-1, /*fp16_plane=*/false);
    std::vector<std::string> logs;
    TrainTwoWorkers(s, &logs);
    EXPECT_THAT(testing::PrintToString(logs), HasSubstr("exchanging over the data plane"));
  }
}

// A NaN narrowed to fp16 is still a NaN: refused, nothing applied.
TEST(PsDataPlaneTest, Fp16NonFiniteGradientCommitsNothing) {
  Shard s("async", "t", /*tcp=*/true);
  RealClock clock;
  std::vector<std::string> logs;
  PsExchange w0(Options(s, 0, "async", "t", v1::WIRE_DTYPE_F16), clock,
                [&](const std::string& l) { logs.push_back(l); });
  std::vector<float> p(kParams, 1.0f), g(kParams, 0.5f);
  ASSERT_EQ(*w0.Start(p), 0);
  g[kParams - 1] = std::numeric_limits<float>::quiet_NaN();
  absl::StatusOr<int64_t> step = w0.Step(0, g, p);
  EXPECT_FALSE(step.ok());
  EXPECT_THAT(std::string(step.status().message()), HasSubstr("NaN/Inf"));
  EXPECT_EQ(s.shard().Status().applied_pushes(), 0);
  EXPECT_EQ(s.shard().Status().rejected_pushes(), 1);
}

TEST(PsDataPlaneTest, UnreachableDataPortFallsBackToGrpcAndSaysSo) {
  // A port nobody listens on: bind one, learn it, close it.
  int closed_port = 0;
  {
    absl::StatusOr<exchange::TcpListener> l = exchange::TcpListener::Listen("127.0.0.1", 0);
    ASSERT_TRUE(l.ok());
    closed_port = l->port();
  }
  Shard s("sync", "t", /*tcp=*/false, /*advertise=*/closed_port);
  std::vector<std::string> logs;
  const std::vector<float> p = TrainTwoWorkers(s, &logs);
  EXPECT_EQ(s.shard().Status().applied_pushes(), 5);  // sync: one update per step
  EXPECT_THAT(testing::PrintToString(logs), HasSubstr("unreachable"));
  EXPECT_THAT(testing::PrintToString(logs), HasSubstr("exchanging over gRPC instead"));
}

// A raw data-plane connection, for what a well-behaved client never sends.
class RawWorker {
 public:
  explicit RawWorker(const std::string& address) {
    absl::StatusOr<exchange::TcpConnection> c = exchange::TcpConnection::Connect(address, 5, {});
    EXPECT_TRUE(c.ok()) << c.status();
    if (c.ok()) conn_ = std::move(*c);
  }
  // The hello and the server's answer to it.
  absl::StatusOr<wire::Answer> Hello(int worker, uint64_t incarnation, const std::string& token) {
    wire::Hello h{worker, incarnation, static_cast<uint32_t>(token.size())};
    const wire::HelloBytes b = wire::EncodeHello(h);
    if (absl::Status s = conn_.SendAll(b.data(), b.size(), token.data(), token.size(), Deadline());
        !s.ok()) {
      return s;
    }
    return ReadAnswer();
  }
  absl::Status SendHeader(const wire::StepHeader& h) {
    const wire::StepHeaderBytes b = wire::EncodeStepHeader(h);
    return conn_.SendAll(b.data(), b.size(), Deadline());
  }
  absl::Status SendFloats(const std::vector<float>& v) {
    return conn_.SendAll(v.data(), v.size() * sizeof(float), Deadline());
  }
  absl::Status SendTrailer(uint32_t crc) {
    const wire::TrailerBytes b = wire::EncodeTrailer(crc);
    return conn_.SendAll(b.data(), b.size(), Deadline());
  }
  absl::StatusOr<wire::Answer> ReadAnswer() {
    wire::AnswerBytes b;
    if (absl::Status s = conn_.RecvAll(b.data(), b.size(), Deadline()); !s.ok()) return s;
    absl::StatusOr<wire::Answer> a = wire::DecodeAnswer(b);
    if (a.ok()) {
      message_.assign(a->message_bytes, '\0');
      if (absl::Status s = conn_.RecvAll(message_.data(), message_.size(), Deadline()); !s.ok()) {
        return s;
      }
    }
    return a;
  }
  const std::string& message() const { return message_; }
  exchange::TcpConnection& conn() { return conn_; }

 private:
  static exchange::IoCheck Deadline() {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    return [end] {
      return std::chrono::steady_clock::now() > end ? absl::DeadlineExceededError("test deadline")
                                                    : absl::OkStatus();
    };
  }
  exchange::TcpConnection conn_;
  std::string message_;
};

// A shard in async mode with layout and parameters, registered by worker 0
// over gRPC (the data plane only carries steps).
class DataPlaneRefusals : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = std::make_unique<ShardClient>("ps-0", shard_.address(), "t");
    tcp_ = std::make_unique<TcpStepTransport>(*client_);
    v1::RegisterRequest r;
    r.set_worker(0);
    r.set_num_params(kParams);
    absl::StatusOr<v1::RegisterResponse> reg = client_->Register(r, std::chrono::seconds(5));
    ASSERT_TRUE(reg.ok()) << reg.status();
    tcp_->Offer(*reg);
    v1::PushHeader h;
    h.set_worker(0);
    h.set_incarnation(kIncarnation);
    h.set_total_steps(10);
    std::vector<float> init(kParams, 1.0f);
    ASSERT_TRUE(client_->Initialize(h, init, 0, v1::WIRE_DTYPE_F32).ok());
    ASSERT_TRUE(tcp_->CanCarry(v1::WIRE_DTYPE_F32));
  }
  wire::StepHeader Header(int64_t step, int64_t length = kParams) {
    wire::StepHeader h;
    h.worker = 0;
    h.step = step;
    h.incarnation = kIncarnation;
    h.offset = 0;
    h.length = length;
    h.clock = step + 1;
    return h;
  }
  // A well-formed push over a new connection: its answer.
  absl::StatusOr<wire::Answer> GoodPush(int64_t step, float value) {
    RawWorker w(shard_.data_address());
    absl::StatusOr<wire::Answer> hello = w.Hello(0, kIncarnation, "t");
    if (!hello.ok() || hello->code != absl::StatusCode::kOk) return hello;
    std::vector<float> g(kParams, value);
    EXPECT_TRUE(w.SendHeader(Header(step)).ok());
    EXPECT_TRUE(w.SendFloats(g).ok());
    EXPECT_TRUE(w.SendTrailer(base::Crc32c(g.data(), g.size() * sizeof(float))).ok());
    return w.ReadAnswer();
  }
  int64_t Applied() { return shard_.shard().Status().applied_pushes(); }
  int64_t Rejected() { return shard_.shard().Status().rejected_pushes(); }

  Shard shard_{"async", "t", /*tcp=*/true};
  std::unique_ptr<ShardClient> client_;
  std::unique_ptr<TcpStepTransport> tcp_;
};

TEST_F(DataPlaneRefusals, AGoodPushIsAppliedAndAnsweredWithTheParameters) {
  absl::StatusOr<wire::Answer> a = GoodPush(0, 0.5f);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->code, absl::StatusCode::kOk);
  EXPECT_TRUE(a->pushed);
  EXPECT_TRUE(a->has_params);
  EXPECT_EQ(a->length, kParams);
  EXPECT_EQ(Applied(), 1);
}

TEST_F(DataPlaneRefusals, WrongTokenIsRefusedAndCounted) {
  RawWorker w(shard_.data_address());
  absl::StatusOr<wire::Answer> a = w.Hello(0, kIncarnation, "another job's token");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->code, absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(w.message(), HasSubstr("missing or wrong job token"));
  EXPECT_EQ(Rejected(), 1);
}

TEST_F(DataPlaneRefusals, OldIncarnationIsToldToReRegister) {
  RawWorker w(shard_.data_address());
  absl::StatusOr<wire::Answer> a = w.Hello(0, kIncarnation + 1, "t");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->code, absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(a->refusal, PsRefusal::kStaleIncarnation);
  EXPECT_THAT(w.message(), HasSubstr("re-register"));
}

TEST_F(DataPlaneRefusals, APeerOfAnotherVersionIsRefusedNamingBoth) {
  wire::HelloBytes v1 = wire::EncodeHello(wire::Hello{0, kIncarnation, 1});
  v1[4] = 1;  // the version field, little-endian, of a version-1 worker
  absl::StatusOr<exchange::TcpConnection> c =
      exchange::TcpConnection::Connect(shard_.data_address(), 5, {});
  ASSERT_TRUE(c.ok()) << c.status();
  const auto check = [] { return absl::OkStatus(); };
  ASSERT_TRUE(c->SendAll(v1.data(), v1.size(), "t", 1, check).ok());
  wire::AnswerBytes b;
  ASSERT_TRUE(c->RecvAll(b.data(), b.size(), check).ok());
  absl::StatusOr<wire::Answer> a = wire::DecodeAnswer(b);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->code, absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a->refusal, PsRefusal::kNone);
  std::string message(a->message_bytes, '\0');
  ASSERT_TRUE(c->RecvAll(message.data(), message.size(), check).ok());
  EXPECT_EQ(message, "PS data-plane version 1 is not this server's 2");
}

TEST_F(DataPlaneRefusals, CorruptPushCommitsNothing) {
  RawWorker w(shard_.data_address());
  ASSERT_EQ(w.Hello(0, kIncarnation, "t")->code, absl::StatusCode::kOk);
  std::vector<float> g(kParams, 0.25f);
  const uint32_t crc = base::Crc32c(g.data(), g.size() * sizeof(float));
  g[kParams / 2] = 99.0f;  // flipped in transit: the checksum was of the good bytes
  ASSERT_TRUE(w.SendHeader(Header(0)).ok());
  ASSERT_TRUE(w.SendFloats(g).ok());
  ASSERT_TRUE(w.SendTrailer(crc).ok());
  absl::StatusOr<wire::Answer> a = w.ReadAnswer();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->code, absl::StatusCode::kDataLoss);
  EXPECT_FALSE(a->pushed);
  EXPECT_THAT(w.message(), HasSubstr("failed its checksum"));
  EXPECT_EQ(Applied(), 0);
  EXPECT_EQ(Rejected(), 1);
  // The slot was released: the retry on a new connection is applied.
  absl::StatusOr<wire::Answer> retry = GoodPush(0, 0.25f);
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(retry->code, absl::StatusCode::kOk);
  EXPECT_EQ(Applied(), 1);
}

TEST_F(DataPlaneRefusals, NonFiniteGradientCommitsNothing) {
  RawWorker w(shard_.data_address());
  ASSERT_EQ(w.Hello(0, kIncarnation, "t")->code, absl::StatusCode::kOk);
  std::vector<float> g(kParams, 0.25f);
  g[7] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(w.SendHeader(Header(0)).ok());
  ASSERT_TRUE(w.SendFloats(g).ok());
  ASSERT_TRUE(w.SendTrailer(base::Crc32c(g.data(), g.size() * sizeof(float))).ok());
  absl::StatusOr<wire::Answer> a = w.ReadAnswer();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_NE(a->code, absl::StatusCode::kOk);
  EXPECT_EQ(Applied(), 0);
  EXPECT_EQ(Rejected(), 1);
}

TEST_F(DataPlaneRefusals, WrongSizedPushIsRefusedBeforeItsPayload) {
  RawWorker w(shard_.data_address());
  ASSERT_EQ(w.Hello(0, kIncarnation, "t")->code, absl::StatusCode::kOk);
  ASSERT_TRUE(w.SendHeader(Header(0, kParams - 1)).ok());
  absl::StatusOr<wire::Answer> a = w.ReadAnswer();  // no payload sent: answered at once
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->code, absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(w.message(), HasSubstr("does not fit"));
  EXPECT_EQ(Applied(), 0);
  EXPECT_EQ(Rejected(), 1);
}

TEST_F(DataPlaneRefusals, HalfSentPushCommitsNothingAndFreesTheSlot) {
  {
    RawWorker w(shard_.data_address());
    ASSERT_EQ(w.Hello(0, kIncarnation, "t")->code, absl::StatusCode::kOk);
    ASSERT_TRUE(w.SendHeader(Header(0)).ok());
    ASSERT_TRUE(w.SendFloats(std::vector<float>(kParams / 3, 0.5f)).ok());
  }  // the worker dies mid-push
  // The server notices the closed connection; the retry is then applied once.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (shard_.data().connections() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(shard_.data().connections(), 0);
  EXPECT_EQ(Applied(), 0);
  absl::StatusOr<wire::Answer> retry = GoodPush(0, 0.5f);
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(retry->code, absl::StatusCode::kOk);
  EXPECT_EQ(Applied(), 1);
}

TEST_F(DataPlaneRefusals, StrangersBytesAreRefused) {
  RawWorker w(shard_.data_address());
  // Exactly a hello's length, so the server has read it all when it answers.
  const std::string junk = std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n123456").substr(0, 32);
  ASSERT_EQ(junk.size(), wire::kHelloBytes);
  ASSERT_TRUE(w.conn().SendAll(junk.data(), junk.size(), {}).ok());
  absl::StatusOr<wire::Answer> a = w.ReadAnswer();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->code, absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(w.message(), HasSubstr("not a kubetrain PS data-plane hello"));
}

TEST_F(DataPlaneRefusals, ConnectionsBeyondTheCapAreRefusedAtOnce) {
  const int cap = shard_.data().MaxConnections();
  ASSERT_EQ(cap, 4 * 2 + 16);
  std::vector<std::unique_ptr<RawWorker>> idle;  // connected, no hello yet
  for (int i = 0; i < cap; ++i) {
    idle.push_back(std::make_unique<RawWorker>(shard_.data_address()));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (shard_.data().connections() < cap && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_EQ(shard_.data().connections(), cap);
  RawWorker one_more(shard_.data_address());
  absl::StatusOr<wire::Answer> a = one_more.ReadAnswer();  // before any hello
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->code, absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(one_more.message(), HasSubstr("at most 24"));
  // Once they are gone, a worker is served again.
  idle.clear();
  while (shard_.data().connections() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  absl::StatusOr<wire::Answer> good = GoodPush(0, 0.5f);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->code, absl::StatusCode::kOk);
}

TEST_F(DataPlaneRefusals, PipelinedStepToAShardWithoutItIsRefused) {
  RawWorker w(shard_.data_address());
  ASSERT_EQ(w.Hello(0, kIncarnation, "t")->code, absl::StatusCode::kOk);
  wire::StepHeader h = Header(0);
  h.pipelined = true;
  ASSERT_TRUE(w.SendHeader(h).ok());
  absl::StatusOr<wire::Answer> a = w.ReadAnswer();  // a plain answer: no frames
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->code, absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(w.message(), HasSubstr("--ps-pipeline"));
  EXPECT_EQ(Applied(), 0);
}

// Pipelined sync steps (--ps-pipeline): chunks applied as they arrive and
// streamed back give the parameters of whole steps, bit for bit, in fp32
// and fp16, with momentum (optimizer state) too. A range of one chunk
// takes plain steps, committed through the same rounds.
TEST(PsDataPlaneTest, PipelinedSyncStepsGiveWholeStepsBits) {
  for (v1::WireDType dtype : {v1::WIRE_DTYPE_F32, v1::WIRE_DTYPE_F16}) {
    for (int64_t n : {kParams, int64_t{1000}}) {
      std::vector<std::string> logs;
      std::vector<float> whole, piped;
      {
        Shard s("sync", "t", /*tcp=*/true, -1, true, 2, /*pipeline=*/false, /*momentum=*/0.9f);
        whole = TrainTwoWorkers(s, &logs, dtype, n);
      }
      {
        Shard s("sync", "t", /*tcp=*/true, -1, true, 2, /*pipeline=*/true, /*momentum=*/0.9f);
        ASSERT_TRUE(s.shard().pipelined());
        std::vector<std::string> piped_logs;
        piped = TrainTwoWorkers(s, &piped_logs, dtype, n);
        EXPECT_EQ(absl::StrContains(testing::PrintToString(piped_logs), "(pipelined sync steps)"),
                  n > wire::ChunkValues(n));
        EXPECT_EQ(s.shard().Status().applied_pushes(), 5);
        // 5 steps of 2 workers, when the range has more than one chunk.
        EXPECT_EQ(s.data().pipelined_steps(), n > wire::ChunkValues(n) ? 10 : 0);
      }
      EXPECT_EQ(whole, piped) << "dtype " << dtype << ", " << n << " parameters";
    }
  }
  // Async mode takes no pipelined steps: its pulls are whole versions.
  Shard async("async", "t", /*tcp=*/true, -1, true, 2, /*pipeline=*/true);
  EXPECT_FALSE(async.shard().pipelined());
}

// A pipelined push sent by hand, chunk by chunk, while a second thread
// reads the shard's frames: the way a push can break off mid-step.
struct RawPipelinedStep {
  enum class Break { kNone, kNonFinite, kCorrupt, kHangUp };
  std::optional<wire::Answer> answer;  // none when the connection ended
  std::string message;
  std::vector<float> params;  // the chunks since the last restart
  int restarts = 0;

  // Sends `g` for `step` as worker 1; `before_break` runs after chunk
  // `at` - 1 was sent, before chunk `at` breaks as `how` says.
  void Run(const std::string& address, int64_t step, const std::vector<float>& g, Break how,
           int64_t at, const std::function<void()>& before_break) {
    RawWorker w(address);
    ASSERT_EQ(w.Hello(1, kIncarnation, "t")->code, absl::StatusCode::kOk);
    params.assign(g.size(), 0.0f);
    std::thread reader([&] { Read(w.conn()); });
    wire::StepHeader h;
    h.worker = 1;
    h.step = step;
    h.incarnation = kIncarnation;
    h.length = static_cast<int64_t>(g.size());
    h.min_step = step + 1;
    h.clock = step + 1;
    h.pipelined = true;
    EXPECT_TRUE(w.SendHeader(h).ok());
    for (int64_t c = 0; c < wire::NumChunks(h.length); ++c) {
      const size_t chunk_values = static_cast<size_t>(wire::ChunkValues(h.length));
      const size_t off = static_cast<size_t>(c) * chunk_values;
      std::vector<float> chunk(
          g.begin() + static_cast<std::ptrdiff_t>(off),
          g.begin() + static_cast<std::ptrdiff_t>(std::min(g.size(), off + chunk_values)));
      uint32_t crc = base::Crc32c(chunk.data(), chunk.size() * sizeof(float));
      if (c == at && how != Break::kNone) {
        before_break();
        if (how == Break::kHangUp) {
          w.conn().Shutdown();
          break;
        }
        if (how == Break::kNonFinite) {
          chunk[3] = std::numeric_limits<float>::infinity();
          crc = base::Crc32c(chunk.data(), chunk.size() * sizeof(float));
        } else {
          chunk[3] += 1.0f;  // changed in transit, after its checksum
        }
      }
      EXPECT_TRUE(w.SendFloats(chunk).ok());
      EXPECT_TRUE(w.SendTrailer(crc).ok());
      // The shard refuses the push at the bad chunk and ends the connection.
      if (c == at && how != Break::kNone) break;
    }
    reader.join();
  }

 private:
  void Read(exchange::TcpConnection& conn) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    const exchange::IoCheck check = [deadline] {
      return std::chrono::steady_clock::now() > deadline ? absl::DeadlineExceededError("deadline")
                                                         : absl::OkStatus();
    };
    int64_t next = 0;
    while (true) {
      wire::FrameBytes fb;
      if (!conn.RecvAll(fb.data(), fb.size(), check).ok()) return;
      absl::StatusOr<wire::Frame> f = wire::DecodeFrame(fb);
      ASSERT_TRUE(f.ok()) << f.status();
      if (f->kind == wire::Frame::Kind::kEnd) {
        wire::AnswerBytes ab;
        ASSERT_TRUE(conn.RecvAll(ab.data(), ab.size(), check).ok());
        answer = *wire::DecodeAnswer(ab);
        message.assign(answer->message_bytes, '\0');
        ASSERT_TRUE(conn.RecvAll(message.data(), message.size(), check).ok());
        return;
      }
      if (f->kind == wire::Frame::Kind::kRestart) {
        ++restarts;
        next = 0;
        continue;
      }
      ASSERT_EQ(f->index, next);
      wire::TrailerBytes tb;
      float* dst = params.data() + next * wire::ChunkValues(static_cast<int64_t>(params.size()));
      // (A hang-up of ours ends the connection anywhere.)
      if (!conn.RecvAll(dst, f->values * sizeof(float), check).ok()) return;
      if (!conn.RecvAll(tb.data(), tb.size(), check).ok()) return;
      EXPECT_EQ(*wire::DecodeTrailer(tb), base::Crc32c(dst, f->values * sizeof(float)));
      ++next;
    }
  }
};

// Two sync steps of two workers with momentum straight on a shard, no
// network, no pipelining: what the pipelined runs below must give.
std::vector<float> TwoPlainSteps(const std::vector<float>& init,
                                 const std::vector<std::vector<float>>& grads) {
  RealClock clock;
  PsShardOptions o;
  o.num_workers = 2;
  o.mode = *ExchangeMode::Parse("sync");
  o.optimizer.kind = "sgd";
  o.optimizer.momentum = 0.9f;
  o.lr.base_lr = 0.5f;
  PsShard shard(o, clock, [](const std::string&) {});
  const int64_t n = static_cast<int64_t>(init.size());
  EXPECT_TRUE(shard.Register(0, n, "").ok());
  EXPECT_TRUE(shard.Register(1, n, "").ok());
  std::span<float> slot = *shard.BeginStaging(0, 0, true);
  std::copy(init.begin(), init.end(), slot.begin());
  EXPECT_TRUE(*shard.CommitInitialize(0, 0, 10));
  shard.EndStaging(0);
  for (int64_t step = 0; step < 2; ++step) {
    for (int w = 0; w < 2; ++w) {
      std::span<float> s = *shard.BeginStaging(w, step, false);
      std::copy(grads[w].begin(), grads[w].end(), s.begin());
      EXPECT_TRUE(shard.CommitPush(w, step).ok());
      shard.EndStaging(w);
    }
  }
  std::vector<float> out(init.size());
  EXPECT_TRUE(shard.Pull(0, 2, 2, out, {}).ok());
  return out;
}

// A pipelined push that breaks off after the shard applied some of the
// round's chunks (a NaN/Inf chunk, a corrupt chunk, a hang-up) rolls the
// round back, parameters and momentum: once the worker pushes again, two
// steps give exactly the plain steps' parameters. The other worker's
// stream restarts and ends with them too.
class PipelinedBreak : public ::testing::TestWithParam<RawPipelinedStep::Break> {};

TEST_P(PipelinedBreak, RollsTheRoundBackAndTheRetryGivesPlainSteps) {
  const RawPipelinedStep::Break how = GetParam();
  Shard s("sync", "t", /*tcp=*/true, -1, true, 2, /*pipeline=*/true, /*momentum=*/0.9f);
  RealClock clock;
  PsExchange w0(Options(s, 0, "sync", "t"), clock, [](const std::string&) {});
  std::vector<float> init(kParams), p0(kParams), g0(kParams), g1(kParams);
  for (int64_t i = 0; i < kParams; ++i) {
    init[i] = p0[i] = static_cast<float>(i % 89) * 0.125f;
    g0[i] = static_cast<float>(i % 13) * 0.01f;
    g1[i] = static_cast<float>((i * 3) % 7) * -0.03f;
  }
  ASSERT_TRUE(w0.Start(p0).ok());
  ShardClient c1("ps-0", s.address(), "t");
  v1::RegisterRequest reg;
  reg.set_worker(1);
  reg.set_num_params(kParams);
  ASSERT_TRUE(c1.Register(reg, std::chrono::seconds(5)).ok());

  absl::StatusOr<int64_t> step0;
  std::thread t0([&] { step0 = w0.Step(0, g0, p0); });
  // The broken push is another gradient: the chunks it had applied must
  // reach nobody, so worker 0's stream has to start again.
  std::vector<float> other(kParams);
  for (int64_t i = 0; i < kParams; ++i) other[i] = g1[i] * 3 + 0.5f;
  RawPipelinedStep broken;
  broken.Run(s.data_address(), 0, other, how, /*at=*/3, [&] {
    // Chunks 0-2 of both workers are in: wait until the shard applied some.
    absl::StatusOr<RoundRead> r = s.shard().WaitRound(1, 0, 0, 0, testing_util::GiveUpAfter());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(r->committed);
    EXPECT_GE(r->ready, 1);
  });
  if (how == RawPipelinedStep::Break::kHangUp) {
    EXPECT_FALSE(broken.answer.has_value());
  } else {
    ASSERT_TRUE(broken.answer.has_value());
    EXPECT_EQ(broken.answer->code, how == RawPipelinedStep::Break::kNonFinite
                                       ? absl::StatusCode::kInvalidArgument
                                       : absl::StatusCode::kDataLoss);
    EXPECT_FALSE(broken.answer->pushed);
    EXPECT_THAT(broken.message, HasSubstr("chunk 3"));
  }
  EXPECT_EQ(s.shard().Status().global_step(), 0);
  EXPECT_EQ(s.shard().Status().rejected_pushes(), how == RawPipelinedStep::Break::kHangUp ? 0 : 1);

  // The retry (a new connection once the old one is done) completes step 0.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  absl::StatusOr<std::span<float>> free_slot = absl::UnavailableError("not tried");
  while (std::chrono::steady_clock::now() < deadline) {
    free_slot = s.shard().BeginStaging(1, 0, false);
    if (free_slot.ok()) break;
    std::this_thread::yield();
  }
  ASSERT_TRUE(free_slot.ok()) << free_slot.status();
  s.shard().EndStaging(1);
  RawPipelinedStep retry;
  retry.Run(s.data_address(), 0, g1, RawPipelinedStep::Break::kNone, -1, {});
  t0.join();
  ASSERT_TRUE(step0.ok()) << step0.status();
  ASSERT_TRUE(retry.answer.has_value());
  EXPECT_EQ(retry.answer->code, absl::StatusCode::kOk);
  EXPECT_TRUE(retry.answer->pushed);
  EXPECT_EQ(retry.params, p0);

  // A second step, where the momentum of step 0 counts.
  absl::StatusOr<int64_t> step1;
  std::thread t1([&] { step1 = w0.Step(1, g0, p0); });
  RawPipelinedStep second;
  second.Run(s.data_address(), 1, g1, RawPipelinedStep::Break::kNone, -1, {});
  t1.join();
  ASSERT_TRUE(step1.ok()) << step1.status();
  EXPECT_EQ(second.params, p0);
  EXPECT_EQ(p0, TwoPlainSteps(init, {g0, g1}));
  EXPECT_EQ(s.shard().Status().applied_pushes(), 2);
}

INSTANTIATE_TEST_SUITE_P(Breaks, PipelinedBreak,
                         ::testing::Values(RawPipelinedStep::Break::kNonFinite,
                                           RawPipelinedStep::Break::kCorrupt,
                                           RawPipelinedStep::Break::kHangUp));

// A pipelined push the shard refuses at its first chunk, while the rest of
// it (32 MB) is far more than the sockets buffer: the worker reads the
// answer and stops sending at once, instead of waiting on a window the
// shard no longer drains.
TEST(PsDataPlaneTest, APipelinedPushRefusedAtItsFirstChunkEndsAtOnce) {
  constexpr int64_t n = int64_t{8} << 20;
  Shard s("sync", "t", /*tcp=*/true, -1, true, /*num_workers=*/1, /*pipeline=*/true);
  RealClock clock;
  PsExchange w(Options(s, 0, "sync", "t"), clock, [](const std::string&) {});
  std::vector<float> p(n, 0.5f), g(n, 0.01f);
  ASSERT_TRUE(w.Start(p).ok());
  // Step 5 when the shard is at 0: from the future.
  std::future<absl::StatusOr<int64_t>> step =
      std::async(std::launch::async, [&] { return w.Step(5, g, p); });
  if (step.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "the refused push did not end";
    s.shard().Abort(absl::UnavailableError("test over"));
    s.data().Stop();  // frees the stuck sender, so the test ends
  }
  absl::StatusOr<int64_t> r = step.get();
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("from the future"));
}

// A worker streaming a pipelined round when the shard aborts (a peer
// declared lost) is told the shard's reason, as on the plain path, instead
// of a broken connection it would retry until its peer timeout.
TEST(PsDataPlaneTest, APipelinedRoundTellsItsWorkersWhyTheShardAborted) {
  Shard s("sync", "t", /*tcp=*/true, -1, true, 2, /*pipeline=*/true);
  RealClock clock;
  std::mutex mu;
  std::vector<std::string> logs;
  PsExchange w0(Options(s, 0, "sync", "t"), clock, [&](const std::string& l) {
    std::lock_guard<std::mutex> lock(mu);
    logs.push_back(l);
  });
  std::vector<float> p(kParams, 1.0f), g(kParams, 0.1f);
  ASSERT_EQ(*w0.Start(p), 0);
  ShardClient c1("ps-0", s.address(), "t");
  v1::RegisterRequest reg;
  reg.set_worker(1);
  reg.set_num_params(kParams);
  ASSERT_TRUE(c1.Register(reg, std::chrono::seconds(5)).ok());
  std::future<absl::StatusOr<int64_t>> step =
      std::async(std::launch::async, [&] { return w0.Step(0, g, p); });
  RawPipelinedStep w1;
  w1.Run(s.data_address(), 0, g, RawPipelinedStep::Break::kHangUp, /*at=*/3, [&] {
    // Chunks of both workers applied and streaming: now the shard aborts.
    absl::StatusOr<RoundRead> r = s.shard().WaitRound(1, 0, 0, 0, testing_util::GiveUpAfter());
    ASSERT_TRUE(r.ok()) << r.status();
    s.shard().Abort(absl::AbortedError("worker-1 was lost"));
  });
  // The PS then exits: a worker that was not told why would retry a dead
  // address until its peer timeout and report only that.
  s.StopServing();
  ASSERT_EQ(step.wait_for(std::chrono::seconds(15)), std::future_status::ready);
  absl::StatusOr<int64_t> r = step.get();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_TRUE(absl::IsAborted(r.status())) << r.status() << testing::PrintToString(logs);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("worker-1 was lost"));
}

TEST(PsDataPlaneTest, StopFreesAWorkerWaitingAtTheSyncBarrier) {
  Shard s("sync", "t", /*tcp=*/true);
  RealClock clock;
  PsExchange w0(Options(s, 0, "sync", "t"), clock, [](const std::string&) {});
  std::vector<float> p(kParams, 1.0f), g(kParams, 0.1f);
  ASSERT_EQ(*w0.Start(p), 0);
  // Worker 1 never pushes: worker 0's step waits at the barrier until the
  // server stops.
  std::future<absl::StatusOr<int64_t>> step =
      std::async(std::launch::async, [&] { return w0.Step(0, g, p); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (s.data().connections() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_EQ(s.data().connections(), 1);
  s.shard().Abort(absl::UnavailableError("parameter server is shutting down"));
  s.data().Stop();
  ASSERT_EQ(step.wait_for(std::chrono::seconds(15)), std::future_status::ready);
  EXPECT_FALSE(step.get().ok());
}

// A shard whose data port is a black hole: it answers the hello, then
// swallows every byte and never answers, as the connection to a shard that
// died while its link was cut looks from the worker's side (the shard's FIN
// was lost). Its gRPC side answers Register and GetStatus with
// `incarnation`, which the test changes to play the shard's restart.
class BlackHoleShard : public v1::ParameterServer::Service {
 public:
  BlackHoleShard() {
    absl::StatusOr<exchange::TcpListener> l = exchange::TcpListener::Listen("127.0.0.1", 0);
    EXPECT_TRUE(l.ok()) << l.status();
    listener_ = std::move(*l);
    hole_ = std::thread([this] { Swallow(); });
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(this);
    server_ = b.BuildAndStart();
  }
  ~BlackHoleShard() override {
    stop_ = true;
    hole_.join();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::atomic<uint64_t> incarnation{7};
  std::atomic<int> status_calls{0};
  // Closes the swallowed connection: the worker's wait ends on its own.
  std::atomic<bool> hang_up{false};

  grpc::Status Register(grpc::ServerContext*, const v1::RegisterRequest* req,
                        v1::RegisterResponse* resp) override {
    resp->set_incarnation(incarnation);
    resp->set_num_shards(1);
    resp->mutable_range()->set_length(req->num_params());
    resp->set_initialized(true);
    resp->set_mode("sync");
    resp->set_data_port(static_cast<uint32_t>(listener_.port()));
    return grpc::Status::OK;
  }
  grpc::Status GetStatus(grpc::ServerContext*, const v1::StatusRequest*,
                         v1::StatusResponse* resp) override {
    ++status_calls;
    resp->set_incarnation(incarnation);
    return grpc::Status::OK;
  }

 private:
  void Swallow() {
    const exchange::IoCheck until_stop = [this] {
      return stop_ ? absl::CancelledError("stop") : absl::OkStatus();
    };
    absl::StatusOr<exchange::TcpConnection> c = listener_.Accept(30, until_stop);
    if (!c.ok()) return;
    wire::HelloBytes hello;
    if (!c->RecvAll(hello.data(), hello.size(), until_stop).ok()) return;
    absl::StatusOr<wire::Hello> h = wire::DecodeHello(hello);
    if (!h.ok()) return;
    std::string token(h->token_bytes, '\0');
    if (!c->RecvAll(token.data(), token.size(), until_stop).ok()) return;
    const wire::AnswerBytes ok = wire::EncodeAnswer(wire::Answer{});
    if (!c->SendAll(ok.data(), ok.size(), until_stop).ok()) return;
    std::vector<char> sink(1 << 16);
    while (!stop_ && !hang_up) {
      // Reads what comes, answers nothing.
      (void)c->RecvAll(sink.data(), 1, [this] {
        return stop_ || hang_up ? absl::CancelledError("stop") : absl::OkStatus();
      });
    }
  }

  exchange::TcpListener listener_;
  std::thread hole_;
  std::atomic<bool> stop_{false};
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

absl::StatusOr<PullReply> PushPullTo(StepTransport& t, uint64_t incarnation,
                                     std::vector<float>& params) {
  v1::PushHeader h;
  h.set_worker(0);
  h.set_step(0);
  h.set_incarnation(incarnation);
  v1::PullRequest pull;
  pull.set_worker(0);
  pull.set_incarnation(incarnation);
  pull.set_min_step(1);
  pull.set_clock(1);
  const std::vector<float> g(params.size(), 0.5f);
  bool pushed = false;
  return t.Step(h, g, pull, params, 0, v1::WIRE_DTYPE_F32, &pushed, {});
}

// A worker's data-plane step sent into the black hole, waiting.
class WaitingStep : public ::testing::Test {
 protected:
  void SetUp() override {
    v1::RegisterRequest r;
    r.set_worker(0);
    r.set_num_params(static_cast<uint64_t>(params_.size()));
    absl::StatusOr<v1::RegisterResponse> reg = client_.Register(r, std::chrono::seconds(5));
    ASSERT_TRUE(reg.ok()) << reg.status();
    tcp_.Offer(*reg);
    ASSERT_TRUE(tcp_.CanCarry(v1::WIRE_DTYPE_F32));
    const uint64_t incarnation = shard_.incarnation;
    step_ = std::async(std::launch::async,
                       [this, incarnation] { return PushPullTo(tcp_, incarnation, params_); });
  }
  void TearDown() override {
    shard_.hang_up = true;  // a step still waiting ends
    if (step_.valid()) step_.wait();
  }
  // Whether the waiting step has asked the shard `n` times within 20 s.
  bool Asked(int n) {
    const auto by = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (shard_.status_calls < n && std::chrono::steady_clock::now() < by) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return shard_.status_calls >= n;
  }
  bool StillWaiting() {
    return step_.wait_for(std::chrono::milliseconds(0)) == std::future_status::timeout;
  }
  absl::StatusOr<PullReply> Outcome() {
    if (step_.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      return absl::DeadlineExceededError("the step still waits 10 s later");
    }
    return step_.get();
  }

  BlackHoleShard shard_;
  ShardClient client_{"ps-0", shard_.address(), "t"};
  TcpStepTransport tcp_{client_};
  std::vector<float> params_ = std::vector<float>(1000);
  std::future<absl::StatusOr<PullReply>> step_;
};

TEST_F(WaitingStep, EndsSoonOnceTheShardRestarted) {
  // Still the same shard: asked, and the step goes on waiting.
  ASSERT_TRUE(Asked(2)) << "the waiting step never asked whether the shard restarted";
  EXPECT_TRUE(StillWaiting());
  // The shard restarts; its old connection stays silent.
  shard_.incarnation = 8;
  absl::StatusOr<PullReply> got = Outcome();
  EXPECT_TRUE(absl::IsUnavailable(got.status())) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("ps-0 restarted (incarnation 7, now 8)"));
  EXPECT_EQ(StepErrorOf(got.status()), StepError::kShardRestarted)
      << "typed, so the worker re-registers at once";
}

TEST_F(WaitingStep, KeepsWaitingOnTheSameShard) {
  ASSERT_TRUE(Asked(3));
  EXPECT_TRUE(StillWaiting())
      << "a shard that answers with the same incarnation is not a restarted one";
  shard_.hang_up = true;  // the wait ends as it always did: the peer closed
  absl::StatusOr<PullReply> got = Outcome();
  EXPECT_TRUE(absl::IsUnavailable(got.status())) << got.status();
  EXPECT_THAT(got.status().message(), Not(HasSubstr("restarted")));
  EXPECT_EQ(StepErrorOf(got.status()), StepError::kUnavailable);
}

TEST(DataPlaneWireTest, TheAnswerCarriesTheRefusalByte) {
  for (PsRefusal r : {PsRefusal::kNone, PsRefusal::kStaleIncarnation, PsRefusal::kUninitialised}) {
    wire::Answer a;
    a.code = absl::StatusCode::kFailedPrecondition;
    a.refusal = r;
    a.message_bytes = 3;
    const wire::AnswerBytes b = wire::EncodeAnswer(a);
    EXPECT_EQ(b[48], static_cast<uint8_t>(r));
    absl::StatusOr<wire::Answer> back = wire::DecodeAnswer(b);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->refusal, r);
    EXPECT_EQ(back->code, absl::StatusCode::kFailedPrecondition);
  }
  wire::AnswerBytes unknown = wire::EncodeAnswer(wire::Answer{});
  unknown[48] = 3;
  EXPECT_THAT(std::string(wire::DecodeAnswer(unknown).status().message()),
              HasSubstr("unknown refusal 3"));
  wire::AnswerBytes reserved = wire::EncodeAnswer(wire::Answer{});
  reserved[63] = 1;
  EXPECT_EQ(wire::DecodeAnswer(reserved).status().code(), absl::StatusCode::kInvalidArgument);
}

// Through the worker's client: the refusal byte becomes the status payload.
TEST(PsDataPlaneTest, RefusalsArriveTypedThroughTheClient) {
  Shard s("async", "t", /*tcp=*/true);
  ShardClient c("ps-0", s.address(), "t");
  TcpStepTransport tcp(c);
  v1::RegisterRequest r;
  r.set_worker(0);
  r.set_num_params(kParams);
  absl::StatusOr<v1::RegisterResponse> reg = c.Register(r, std::chrono::seconds(5));
  ASSERT_TRUE(reg.ok()) << reg.status();
  tcp.Offer(*reg);
  ASSERT_TRUE(tcp.CanCarry(v1::WIRE_DTYPE_F32));
  std::vector<float> params(kParams);
  absl::StatusOr<PullReply> got = PushPullTo(tcp, kIncarnation, params);  // never initialised
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(PsRefusalOf(got.status()), PsRefusal::kUninitialised) << got.status();
  got = PushPullTo(tcp, kIncarnation + 1, params);  // refused at the hello
  EXPECT_EQ(PsRefusalOf(got.status()), PsRefusal::kStaleIncarnation) << got.status();
  EXPECT_TRUE(tcp.CanCarry(v1::WIRE_DTYPE_F32)) << "the refusals came over the data plane";
}

// A data port that refuses the first hello as from an old incarnation, with
// `text` and `refusal`, then points the shard's registrations at its real
// data plane.
absl::StatusOr<int64_t> StepPastAFakeRefusal(PsRefusal refusal, const std::string& text,
                                             std::vector<std::string>* logs, Shard& s) {
  absl::StatusOr<exchange::TcpListener> listener = exchange::TcpListener::Listen("127.0.0.1", 0);
  if (!listener.ok()) return listener.status();
  s.Advertise(listener->port());
  std::atomic<bool> done{false};
  std::thread fake([&] {
    const auto check = [&] { return done ? absl::CancelledError("") : absl::OkStatus(); };
    absl::StatusOr<exchange::TcpConnection> c = listener->Accept(20, check);
    if (!c.ok()) return;
    wire::HelloBytes hello;
    std::string token(1, '\0');
    if (!c->RecvAll(hello.data(), hello.size(), check).ok()) return;
    if (!c->RecvAll(token.data(), token.size(), check).ok()) return;
    wire::Answer a;
    a.code = absl::StatusCode::kFailedPrecondition;
    a.refusal = refusal;
    a.incarnation = kIncarnation;
    a.message_bytes = static_cast<uint32_t>(text.size());
    s.Advertise(s.data().port());
    const wire::AnswerBytes b = wire::EncodeAnswer(a);
    (void)c->SendAll(b.data(), b.size(), text.data(), text.size(), check);
  });
  RealClock clock;
  PsExchange w(Options(s, 0, "async", "t"), clock,
               [&](const std::string& l) { logs->push_back(l); });
  std::vector<float> p(kParams, 1.0f), g(kParams, 0.5f);
  absl::StatusOr<int64_t> out = w.Start(p);
  if (out.ok()) out = w.Step(0, g, p);
  done = true;
  fake.join();
  return out;
}

TEST(PsDataPlaneTest, AWorkerReRegistersOnTheTypedRefusalWhateverItsText) {
  Shard s("async", "t", /*tcp=*/true);
  std::vector<std::string> logs;
  absl::StatusOr<int64_t> n = StepPastAFakeRefusal(
      PsRefusal::kStaleIncarnation, "words nobody parses (no re-r-word here)", &logs, s);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(s.shard().Status().applied_pushes(), 1) << "the step went to the real data plane";
  EXPECT_TRUE(std::any_of(logs.begin(), logs.end(), [](const std::string& l) {
    return absl::StrContains(l, "words nobody parses");
  })) << "the refusal was taken as a restart";
  EXPECT_FALSE(std::any_of(logs.begin(), logs.end(), [](const std::string& l) {
    return absl::StrContains(l, "lost ");
  })) << "re-registered at once, not after losing the shard";
}

TEST(PsDataPlaneTest, TheOldTextWithoutTheTypedRefusalIsNoRestart) {
  Shard s("async", "t", /*tcp=*/true);
  std::vector<std::string> logs;
  absl::StatusOr<int64_t> n = StepPastAFakeRefusal(
      PsRefusal::kNone, "parameter server restarted (incarnation 1, caller has 2); re-register",
      &logs, s);
  EXPECT_EQ(n.status().code(), absl::StatusCode::kFailedPrecondition) << n.status();
  EXPECT_EQ(s.shard().Status().applied_pushes(), 0);
}

TEST(DataPlaneWireTest, RoundTripsAndRefusesWhatIsNotItsOwn) {
  wire::StepHeader h{3, 17, 99, 1000, 2000, 18, 18};
  absl::StatusOr<wire::StepHeader> back = wire::DecodeStepHeader(wire::EncodeStepHeader(h));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->worker, 3);
  EXPECT_EQ(back->step, 17);
  EXPECT_EQ(back->incarnation, 99u);
  EXPECT_EQ(back->offset, 1000);
  EXPECT_EQ(back->length, 2000);
  EXPECT_EQ(back->min_step, 18);
  EXPECT_EQ(back->dtype, wire::DType::kF32);
  h.dtype = wire::DType::kF16;
  EXPECT_EQ(wire::DecodeStepHeader(wire::EncodeStepHeader(h))->dtype, wire::DType::kF16);
  wire::StepHeaderBytes unknown = wire::EncodeStepHeader(h);
  unknown[56] = 7;  // a dtype this version does not know
  EXPECT_THAT(std::string(wire::DecodeStepHeader(unknown).status().message()),
              HasSubstr("unknown dtype 7"));
  wire::Answer a;
  a.code = absl::StatusCode::kAborted;
  a.pushed = true;
  a.finished = true;
  a.message_bytes = 12;
  absl::StatusOr<wire::Answer> ab = wire::DecodeAnswer(wire::EncodeAnswer(a));
  ASSERT_TRUE(ab.ok());
  EXPECT_EQ(ab->code, absl::StatusCode::kAborted);
  EXPECT_TRUE(ab->pushed && ab->finished && !ab->has_params);
  EXPECT_EQ(ab->message_bytes, 12u);
  EXPECT_EQ(*wire::DecodeTrailer(wire::EncodeTrailer(0xdeadbeef)), 0xdeadbeefu);

  wire::HelloBytes hello = wire::EncodeHello({1, 2, 5});
  hello[4] = 9;  // another version
  EXPECT_THAT(std::string(wire::DecodeHello(hello).status().message()), HasSubstr("version 9"));
  EXPECT_FALSE(wire::DecodeHello(wire::EncodeHello({1, 2, wire::kMaxTokenBytes + 1})).ok());
  wire::StepHeader bad = h;
  bad.length = 0;
  EXPECT_FALSE(wire::DecodeStepHeader(wire::EncodeStepHeader(bad)).ok());
  wire::TrailerBytes t = wire::EncodeTrailer(1);
  t[0] ^= 1;
  EXPECT_TRUE(absl::IsDataLoss(wire::DecodeTrailer(t).status()));
  h.pipelined = true;
  EXPECT_TRUE(wire::DecodeStepHeader(wire::EncodeStepHeader(h))->pipelined);
  wire::StepHeaderBytes flags = wire::EncodeStepHeader(h);
  flags[60] = 6;  // flags this version does not know
  EXPECT_THAT(std::string(wire::DecodeStepHeader(flags).status().message()),
              HasSubstr("unknown flags"));
  absl::StatusOr<wire::Frame> f =
      wire::DecodeFrame(wire::EncodeFrame({wire::Frame::Kind::kChunk, 7, 1234}));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->kind, wire::Frame::Kind::kChunk);
  EXPECT_EQ(f->index, 7u);
  EXPECT_EQ(f->values, 1234u);
  EXPECT_FALSE(wire::DecodeFrame(wire::EncodeFrame({wire::Frame::Kind::kChunk, 0, 0})).ok());
  EXPECT_FALSE(wire::DecodeFrame(
                   wire::EncodeFrame({wire::Frame::Kind::kChunk, 0, wire::kMaxChunkValues + 1}))
                   .ok());
  wire::FrameBytes odd = wire::EncodeFrame({wire::Frame::Kind::kEnd, 0, 0});
  odd[4] = 9;  // a kind this version does not know
  EXPECT_FALSE(wire::DecodeFrame(odd).ok());
  wire::FrameBytes from_answer;
  const wire::AnswerBytes ans = wire::EncodeAnswer(a);
  std::copy(ans.begin(), ans.begin() + wire::kFrameBytes, from_answer.begin());
  EXPECT_TRUE(wire::StartsAnAnswer(from_answer));
  EXPECT_FALSE(wire::StartsAnAnswer(odd));
  EXPECT_EQ(wire::NumChunks(1), 1);
  EXPECT_EQ(wire::ChunkValues(1000), wire::kMinChunkValues);
  EXPECT_EQ(wire::ChunkValues(int64_t{1} << 30), wire::kMaxChunkValues);
  EXPECT_EQ(wire::ChunkValues(4 * 1024 * 1024), 128 * 1024);  // 1/32
  EXPECT_EQ(wire::NumChunks(wire::kMinChunkValues), 1);
  EXPECT_EQ(wire::NumChunks(wire::kMinChunkValues + 1), 2);
  EXPECT_EQ(wire::NumChunks(300000), 19);
}

}  // namespace
}  // namespace kubetrain::ps
