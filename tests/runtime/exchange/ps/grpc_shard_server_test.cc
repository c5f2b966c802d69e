// The parameter-server service over real gRPC on loopback: authentication,
// every kind of malformed push (refused, counted, the PS keeps serving),
// fp16 on the wire, and PsExchange against two shards.
#include "runtime/exchange/ps/grpc_shard_server.h"

#include <google/protobuf/descriptor.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/support/method_handler.h>

#include <cmath>
#include <filesystem>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kubetrain/v1/parameter_server.grpc.pb.h"
#include "runtime/exchange/checkpoint.h"
#include "runtime/exchange/grpc_util.h"
#include "runtime/exchange/ps/grpc_step_transport.h"
#include "runtime/exchange/ps/ps_exchange.h"
#include "runtime/exchange/ps/ps_refusal.h"
#include "runtime/exchange/ps/shard_client.h"
#include "runtime/exchange/ps/wire_values.h"
#include "tests/support/temp_files.h"
#include "tests/support/tensor_chunk_codec.h"

namespace kubetrain::ps {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kParams = 1000;

// The service as servers were before PushPull: every other method of
// GrpcShardServer, registered the same way.
class ServiceWithoutPushPull final : public grpc::Service {
 public:
  explicit ServiceWithoutPushPull(GrpcShardServer& ps) {
    using grpc::internal::RpcMethod;
    using grpc::internal::RpcServiceMethod;
    using Reader = grpc::ServerReader<grpc::ByteBuffer>;
    using Writer = grpc::ServerWriter<grpc::ByteBuffer>;
    AddMethod(new RpcServiceMethod(
        kPsRegisterMethod, RpcMethod::NORMAL_RPC,
        new grpc::internal::RpcMethodHandler<GrpcShardServer, v1::RegisterRequest,
                                             v1::RegisterResponse>(
            [](GrpcShardServer* p, grpc::ServerContext* c, const v1::RegisterRequest* q,
               v1::RegisterResponse* r) { return p->Register(c, q, r); },
            &ps)));
    AddMethod(new RpcServiceMethod(
        kPsInitializeMethod, RpcMethod::CLIENT_STREAMING,
        new grpc::internal::ClientStreamingHandler<GrpcShardServer, grpc::ByteBuffer,
                                                   v1::PushResponse>(
            [](GrpcShardServer* p, grpc::ServerContext* c, Reader* r, v1::PushResponse* resp) {
              return p->Initialize(c, r, resp);
            },
            &ps)));
    AddMethod(new RpcServiceMethod(
        kPsPushMethod, RpcMethod::CLIENT_STREAMING,
        new grpc::internal::ClientStreamingHandler<GrpcShardServer, grpc::ByteBuffer,
                                                   v1::PushResponse>(
            [](GrpcShardServer* p, grpc::ServerContext* c, Reader* r, v1::PushResponse* resp) {
              return p->Push(c, r, resp);
            },
            &ps)));
    AddMethod(new RpcServiceMethod(
        kPsPullMethod, RpcMethod::SERVER_STREAMING,
        new grpc::internal::ServerStreamingHandler<GrpcShardServer, v1::PullRequest,
                                                   grpc::ByteBuffer>(
            [](GrpcShardServer* p, grpc::ServerContext* c, const v1::PullRequest* q, Writer* w) {
              return p->Pull(c, q, w);
            },
            &ps)));
    AddMethod(new RpcServiceMethod(
        kPsDoneMethod, RpcMethod::NORMAL_RPC,
        new grpc::internal::RpcMethodHandler<GrpcShardServer, v1::DoneRequest, v1::DoneResponse>(
            [](GrpcShardServer* p, grpc::ServerContext* c, const v1::DoneRequest* q,
               v1::DoneResponse* r) { return p->Done(c, q, r); },
            &ps)));
  }
};

// One shard served on an ephemeral loopback port; `push_pull` false serves
// it without the PushPull method (a server from before it).
class TestShard {
 public:
  TestShard(int index, int num_shards, const std::string& mode, const std::string& token,
            const std::string& checkpoint_dir = "", bool push_pull = true) {
    PsShardOptions o;
    o.shard_index = index;
    o.num_shards = num_shards;
    o.num_workers = 2;
    o.mode = *ExchangeMode::Parse(mode);
    o.optimizer.kind = "sgd";
    o.optimizer.momentum = 0;
    o.lr.base_lr = 0.5f;
    o.incarnation = 1000 + index;
    o.checkpoint_dir = checkpoint_dir;
    shard_ = std::make_unique<PsShard>(o, clock_, [](const std::string&) {});
    session_ = std::make_unique<ShardSession>(*shard_, token);
    service_ = std::make_unique<GrpcShardServer>(*session_);
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    if (push_pull) {
      b.RegisterService(service_.get());
    } else {
      old_service_ = std::make_unique<ServiceWithoutPushPull>(*service_);
      b.RegisterService(old_service_.get());
    }
    server_ = b.BuildAndStart();
  }
  ~TestShard() {
    shard_->Abort(absl::UnavailableError("test over"));
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  PsShard& shard() { return *shard_; }

 private:
  RealClock clock_;
  std::unique_ptr<PsShard> shard_;
  std::unique_ptr<ShardSession> session_;
  std::unique_ptr<GrpcShardServer> service_;
  std::unique_ptr<ServiceWithoutPushPull> old_service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

v1::RegisterRequest Reg(int worker) {
  v1::RegisterRequest r;
  r.set_worker(worker);
  r.set_num_params(kParams);
  return r;
}

v1::PushHeader Header(int worker, int64_t step, uint64_t incarnation) {
  v1::PushHeader h;
  h.set_worker(worker);
  h.set_step(step);
  h.set_incarnation(incarnation);
  h.set_total_steps(10);
  return h;
}

// The shard's Push call, which no worker makes any more (a worker's steps
// go over a StepTransport); the shard still serves it, so its refusals are
// tested here, through the generated stub with the client's token.
absl::StatusOr<v1::PushResponse> Push(const ShardClient& c, const v1::PushHeader& header,
                                      std::span<const float> values, int64_t offset,
                                      v1::WireDType dtype) {
  std::unique_ptr<v1::ParameterServer::Stub> stub = v1::ParameterServer::NewStub(c.channel());
  grpc::ClientContext ctx;
  c.Prepare(&ctx);
  v1::PushResponse resp;
  std::unique_ptr<grpc::ClientWriter<v1::PushMessage>> w = stub->Push(&ctx, &resp);
  const int64_t n = static_cast<int64_t>(values.size());
  for (int64_t off = 0; off < n; off += kChunkElements) {
    const int64_t len = std::min(kChunkElements, n - off);
    v1::PushMessage m;
    if (off == 0) *m.mutable_header() = header;
    EncodeChunk(values.subspan(static_cast<size_t>(off), static_cast<size_t>(len)), offset + off,
                dtype, m.mutable_chunk());
    if (!w->Write(m)) break;  // the server ended the call; Finish says why
  }
  w->WritesDone();
  const grpc::Status st = w->Finish();
  if (!st.ok()) return exchange::FromGrpc(st);
  return resp;
}

TEST(GrpcShardServer, CallsWithoutTheJobTokenAreUnauthenticated) {
  TestShard ps(0, 1, "sync", "s3cret");
  ShardClient anonymous("ps-0", ps.address(), "");
  absl::StatusOr<v1::RegisterResponse> r = anonymous.Register(Reg(0), std::chrono::seconds(5));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnauthenticated);
  ShardClient wrong("ps-0", ps.address(), "guess");
  EXPECT_EQ(wrong.GetStatus(std::chrono::seconds(5)).status().code(),
            absl::StatusCode::kUnauthenticated);
  // The refused register is counted as a rejected push (reason bad_token);
  // the status read is refused but not counted (it writes nothing).
  EXPECT_EQ(ps.shard().Status().rejected_pushes(), 1);
  ShardClient good("ps-0", ps.address(), "s3cret");
  EXPECT_TRUE(good.Register(Reg(0), std::chrono::seconds(5)).ok());
  absl::StatusOr<v1::RegisterResponse> ok = good.Register(Reg(1), std::chrono::seconds(5));
  ASSERT_TRUE(ok.ok());
  // Another job's worker pushing: refused and counted.
  std::vector<float> g(kParams, 0.5f);
  EXPECT_EQ(
      wrong.Initialize(Header(1, 0, ok->incarnation()), g, 0, v1::WIRE_DTYPE_F32).status().code(),
      absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(ps.shard().Status().rejected_pushes(), 2);
}

v1::PullRequest PullFor(int worker, int64_t min_step, int64_t clock, uint64_t incarnation);

// Over gRPC a refusal the worker acts on arrives typed (PsRefusalOf), on
// every call that can carry it: a stale incarnation on Push, Pull and
// PushPull, a shard without parameters on Push and PushPull.
TEST(GrpcShardServer, RefusalsTheWorkerActsOnArriveTyped) {
  TestShard ps(0, 1, "async", "");
  ShardClient c("ps-0", ps.address(), "");
  GrpcStepTransport grpc(c);
  const uint64_t inc = c.Register(Reg(0), std::chrono::seconds(5))->incarnation();
  const std::vector<float> g(kParams, 0.5f);
  std::vector<float> out(kParams);
  bool pushed = false;
  // Registered, never initialised.
  absl::StatusOr<v1::PushResponse> s = Push(c, Header(0, 0, inc), g, 0, v1::WIRE_DTYPE_F32);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(PsRefusalOf(s.status()), PsRefusal::kUninitialised) << s.status();
  absl::StatusOr<PullReply> r = grpc.Step(Header(0, 0, inc), g, PullFor(0, 0, 1, inc), out, 0,
                                          v1::WIRE_DTYPE_F32, &pushed, {});
  EXPECT_EQ(PsRefusalOf(r.status()), PsRefusal::kUninitialised) << r.status();
  // Another incarnation.
  s = Push(c, Header(0, 0, inc + 1), g, 0, v1::WIRE_DTYPE_F32);
  EXPECT_EQ(PsRefusalOf(s.status()), PsRefusal::kStaleIncarnation) << s.status();
  r = c.Pull(PullFor(0, 0, 0, inc + 1), out, 0);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(PsRefusalOf(r.status()), PsRefusal::kStaleIncarnation) << r.status();
  r = grpc.Step(Header(0, 0, inc + 1), g, PullFor(0, 0, 1, inc + 1), out, 0, v1::WIRE_DTYPE_F32,
                &pushed, {});
  EXPECT_EQ(PsRefusalOf(r.status()), PsRefusal::kStaleIncarnation) << r.status();
  // Other refusals carry none.
  s = Push(c, Header(7, 0, inc), g, 0, v1::WIRE_DTYPE_F32);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PsRefusalOf(s.status()), PsRefusal::kNone);
}

TEST(GrpcShardServer, MalformedPushesAreRefusedAndThePsKeepsServing) {
  TestShard ps(0, 1, "sync", "");
  ShardClient c("ps-0", ps.address(), "");
  absl::StatusOr<v1::RegisterResponse> r = c.Register(Reg(0), std::chrono::seconds(5));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(c.Register(Reg(1), std::chrono::seconds(5)).ok());
  const uint64_t inc = r->incarnation();
  std::vector<float> init(kParams, 1.0f), g(kParams, 0.5f);
  ASSERT_TRUE(c.Initialize(Header(0, 0, inc), init, 0, v1::WIRE_DTYPE_F32).ok());

  // Too few elements.
  absl::StatusOr<v1::PushResponse> s =
      Push(c, Header(0, 0, inc), std::span<const float>(g).first(900), 0, v1::WIRE_DTYPE_F32);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("push covers 900 of the 1000"));
  // Wrong offset.
  s = Push(c, Header(0, 0, inc), g, 16, v1::WIRE_DTYPE_F32);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("does not fit: shard 0 owns [0, 1000)"));
  // Too many elements.
  std::vector<float> big(kParams + 16, 0.5f);
  s = Push(c, Header(0, 0, inc), big, 0, v1::WIRE_DTYPE_F32);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  // Unknown worker, future step, NaN.
  s = Push(c, Header(7, 0, inc), g, 0, v1::WIRE_DTYPE_F32);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("unknown worker id 7"));
  s = Push(c, Header(1, 4, inc), g, 0, v1::WIRE_DTYPE_F32);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("from the future"));
  std::vector<float> nan = g;
  nan[17] = std::nanf("");
  s = Push(c, Header(0, 0, inc), nan, 0, v1::WIRE_DTYPE_F32);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("1 NaN/Inf values"));
  // A stale incarnation is told to re-register.
  s = Push(c, Header(0, 0, inc + 1), g, 0, v1::WIRE_DTYPE_F32);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(PsRefusalOf(s.status()), PsRefusal::kStaleIncarnation);

  absl::StatusOr<v1::StatusResponse> st = c.GetStatus(std::chrono::seconds(5));
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->rejected_pushes(), 6);
  EXPECT_EQ(st->global_step(), 0);

  // Parameters untouched, and a good step still works.
  std::vector<float> out(kParams);
  v1::PullRequest pr;
  pr.set_worker(0);
  ASSERT_TRUE(c.Pull(pr, out, 0).ok());
  EXPECT_EQ(out, init);
  ASSERT_TRUE(Push(c, Header(0, 0, inc), g, 0, v1::WIRE_DTYPE_F32).ok());
  ASSERT_TRUE(Push(c, Header(1, 0, inc), g, 0, v1::WIRE_DTYPE_F32).ok());
  pr.set_min_step(1);
  absl::StatusOr<PullReply> reply = c.Pull(pr, out, 0);
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->global_step, 1);
  EXPECT_FLOAT_EQ(out[0], 1.0f - 0.5f * 0.5f);
}

TEST(GrpcShardServer, ServesTheMethodsTheProtoDeclares) {
  const google::protobuf::ServiceDescriptor* d =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          "kubetrain.v1.ParameterServer");
  ASSERT_NE(d, nullptr);
  const std::vector<std::string> ours = {kPsRegisterMethod,   kPsInitializeMethod, kPsPushMethod,
                                         kPsPullMethod,       kPsPushPullMethod,   kPsDoneMethod,
                                         kPsCheckpointMethod, kPsGetStatusMethod};
  std::vector<std::string> declared;
  for (int i = 0; i < d->method_count(); ++i) {
    declared.push_back("/" + d->full_name() + "/" + d->method(i)->name());
  }
  EXPECT_EQ(ours, declared);
}

// A worker built on the generated protobuf stubs (the wire format before the
// hand-encoded frames) pushes and pulls unchanged, and a corrupt chunk from
// it is refused whole.
TEST(GrpcShardServer, ClientsOnTheGeneratedStubsInteroperate) {
  TestShard ps(0, 1, "async", "");
  ShardClient c("ps-0", ps.address(), "");
  const uint64_t inc = c.Register(Reg(0), std::chrono::seconds(5))->incarnation();
  std::vector<float> init(kParams), g(kParams);
  for (int64_t i = 0; i < kParams; ++i) {
    init[i] = static_cast<float>(i);
    g[i] = 0.25f * static_cast<float>(i % 7);
  }
  ASSERT_TRUE(c.Initialize(Header(0, 0, inc), init, 0, v1::WIRE_DTYPE_F32).ok());
  std::unique_ptr<v1::ParameterServer::Stub> stub = v1::ParameterServer::NewStub(
      grpc::CreateChannel(ps.address(), grpc::InsecureChannelCredentials()));
  // Two protobuf messages: the header with the first 600 values, then the rest.
  auto push = [&](bool corrupt) {
    grpc::ClientContext ctx;
    v1::PushResponse resp;
    std::unique_ptr<grpc::ClientWriter<v1::PushMessage>> w = stub->Push(&ctx, &resp);
    v1::PushMessage m;
    *m.mutable_header() = Header(0, 0, inc);
    EncodeChunk(std::span<const float>(g).first(600), 0, v1::WIRE_DTYPE_F32, m.mutable_chunk());
    w->Write(m);
    m.clear_header();
    EncodeChunk(std::span<const float>(g).subspan(600), 600, v1::WIRE_DTYPE_F32, m.mutable_chunk());
    if (corrupt) (*m.mutable_chunk()->mutable_data())[100] ^= 0x01;
    w->Write(m);
    w->WritesDone();
    grpc::Status st = w->Finish();
    return std::make_pair(st, resp);
  };
  auto [bad, bad_resp] = push(/*corrupt=*/true);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::DATA_LOSS);
  EXPECT_THAT(bad.error_message(), HasSubstr("chunk at offset 600 failed its checksum"));
  EXPECT_EQ(ps.shard().Status().rejected_pushes(), 1);
  EXPECT_EQ(ps.shard().Status().global_step(), 0);
  auto [good, resp] = push(/*corrupt=*/false);
  ASSERT_TRUE(good.ok()) << good.error_message();
  EXPECT_TRUE(resp.accepted());
  EXPECT_EQ(resp.global_step(), 1);

  grpc::ClientContext ctx;
  v1::PullRequest pr;
  pr.set_worker(0);
  std::unique_ptr<grpc::ClientReader<v1::PullMessage>> r = stub->Pull(&ctx, pr);
  v1::PullMessage m;
  std::vector<float> out(kParams);
  int64_t covered = 0;
  int messages = 0;
  while (r->Read(&m)) {
    if (messages++ == 0) {
      EXPECT_EQ(m.global_step(), 1);
      EXPECT_EQ(m.incarnation(), inc);
    }
    const int64_t len = static_cast<int64_t>(m.chunk().range().length());
    ASSERT_EQ(static_cast<int64_t>(m.chunk().range().offset()), covered);
    ASSERT_TRUE(DecodeChunk(m.chunk(), std::span<float>(out).subspan(covered, len)).ok());
    covered += len;
  }
  ASSERT_TRUE(r->Finish().ok());
  ASSERT_EQ(covered, kParams);
  for (int64_t i = 0; i < kParams; ++i) EXPECT_FLOAT_EQ(out[i], init[i] - 0.5f * g[i]) << i;
}

v1::PullRequest PullFor(int worker, int64_t min_step, int64_t clock, uint64_t incarnation) {
  v1::PullRequest r;
  r.set_worker(worker);
  r.set_min_step(min_step);
  r.set_clock(clock);
  r.set_incarnation(incarnation);
  return r;
}

// Sync steps of two workers, each on its own PushPull stream kept open from
// step to step: every step's pull waits for both gradients and returns
// their average applied.
TEST(GrpcShardServer, PushPullRunsSyncStepsOnOneStreamPerWorker) {
  TestShard ps(0, 1, "sync", "t");
  ShardClient c0("ps-0", ps.address(), "t"), c1("ps-0", ps.address(), "t");
  GrpcStepTransport t0(c0), t1(c1);
  const uint64_t inc = c0.Register(Reg(0), std::chrono::seconds(5))->incarnation();
  ASSERT_TRUE(c1.Register(Reg(1), std::chrono::seconds(5)).ok());
  std::vector<float> init(kParams), p0(kParams), p1(kParams);
  for (int64_t i = 0; i < kParams; ++i) init[i] = static_cast<float>(i);
  ASSERT_TRUE(c0.Initialize(Header(0, 0, inc), init, 0, v1::WIRE_DTYPE_F32).ok());
  const std::vector<float> g0(kParams, 1.0f), g1(kParams, 3.0f);
  for (int64_t step = 0; step < 3; ++step) {
    absl::StatusOr<PullReply> r1;
    bool pushed1 = false;
    std::thread t([&] {
      r1 = t1.Step(Header(1, step, inc), g1, PullFor(1, step + 1, step + 1, inc), p1, 0,
                   v1::WIRE_DTYPE_F32, &pushed1, {});
    });
    bool pushed0 = false;
    absl::StatusOr<PullReply> r0 =
        t0.Step(Header(0, step, inc), g0, PullFor(0, step + 1, step + 1, inc), p0, 0,
                v1::WIRE_DTYPE_F32, &pushed0, {});
    t.join();
    ASSERT_TRUE(r0.ok()) << r0.status();
    ASSERT_TRUE(r1.ok()) << r1.status();
    EXPECT_TRUE(pushed0 && pushed1);
    EXPECT_EQ(r0->global_step, step + 1);
    EXPECT_EQ(r1->global_step, step + 1);
    EXPECT_EQ(r0->incarnation, inc);
    // lr 0.5 times the mean gradient 2: one per step.
    for (int64_t i = 0; i < kParams; ++i) {
      ASSERT_FLOAT_EQ(p0[i], init[i] - static_cast<float>(step + 1)) << i;
    }
    EXPECT_EQ(p1, p0);
  }
  EXPECT_EQ(ps.shard().Status().applied_pushes(), 3);
  EXPECT_EQ(ps.shard().Status().rejected_pushes(), 0);
  t0.Close();
  t1.Close();
}

// A bad step on a PushPull stream ends the stream with the error Push would
// give and commits nothing; the worker's next stream works. Covers a NaN
// gradient, a short push (the pull request, which ends a step's push, came
// before the range was covered), a pull for another worker, a stale
// incarnation and a duplicate of an accepted step (dropped, still answered).
TEST(GrpcShardServer, PushPullRefusesBadStepsWholeAndTheNextStreamWorks) {
  TestShard ps(0, 1, "async", "");
  ShardClient c("ps-0", ps.address(), "");
  GrpcStepTransport grpc(c);
  const uint64_t inc = c.Register(Reg(0), std::chrono::seconds(5))->incarnation();
  const std::vector<float> init(kParams, 1.0f), g(kParams, 0.5f);
  ASSERT_TRUE(c.Initialize(Header(0, 0, inc), init, 0, v1::WIRE_DTYPE_F32).ok());
  std::vector<float> out(kParams, -7.0f);
  bool pushed = true;

  std::vector<float> nan = g;
  nan[17] = std::nanf("");
  absl::StatusOr<PullReply> r = grpc.Step(Header(0, 0, inc), nan, PullFor(0, 0, 1, inc), out, 0,
                                          v1::WIRE_DTYPE_F32, &pushed, {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("1 NaN/Inf values"));
  EXPECT_FALSE(pushed);

  r = grpc.Step(Header(0, 0, inc), std::span<const float>(g).first(900), PullFor(0, 0, 1, inc), out,
                0, v1::WIRE_DTYPE_F32, &pushed, {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("push covers 900 of the 1000"));

  r = grpc.Step(Header(0, 0, inc), g, PullFor(1, 0, 1, inc), out, 0, v1::WIRE_DTYPE_F32, &pushed,
                {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("PushPull step of worker 0 asks to pull for worker 1"));

  r = grpc.Step(Header(0, 0, inc + 1), g, PullFor(0, 0, 1, inc + 1), out, 0, v1::WIRE_DTYPE_F32,
                &pushed, {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("re-register"));
  EXPECT_EQ(PsRefusalOf(r.status()), PsRefusal::kStaleIncarnation);

  EXPECT_EQ(ps.shard().Status().global_step(), 0);
  EXPECT_EQ(ps.shard().Status().rejected_pushes(), 3);
  EXPECT_EQ(out, std::vector<float>(kParams, -7.0f)) << "nothing was pulled";

  // A good step, then the same step again on the same stream: the repeat is
  // dropped as stale (async: the worker's clock moved on) and still pulls.
  r = grpc.Step(Header(0, 0, inc), g, PullFor(0, 0, 1, inc), out, 0, v1::WIRE_DTYPE_F32, &pushed,
                {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(pushed);
  EXPECT_EQ(r->global_step, 1);
  EXPECT_FLOAT_EQ(out[0], 1.0f - 0.5f * 0.5f);
  r = grpc.Step(Header(0, 0, inc), g, PullFor(0, 0, 1, inc), out, 0, v1::WIRE_DTYPE_F32, &pushed,
                {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->global_step, 1);
  EXPECT_FLOAT_EQ(out[0], 1.0f - 0.5f * 0.5f);
  EXPECT_EQ(ps.shard().Status().stale_pushes(), 1);
  EXPECT_EQ(ps.shard().Status().applied_pushes(), 1);
}

// A step larger than one chunk: the push spans several messages (the pull
// request on the last), and so does the pull.
TEST(GrpcShardServer, PushPullStepsSpanSeveralChunks) {
  TestShard ps(0, 1, "async", "");
  ShardClient c("ps-0", ps.address(), "");
  GrpcStepTransport grpc(c);
  const int64_t n = 2 * kChunkElements + 123;
  v1::RegisterRequest reg;
  reg.set_worker(0);
  reg.set_num_params(static_cast<uint64_t>(n));
  const uint64_t inc = c.Register(reg, std::chrono::seconds(5))->incarnation();
  std::vector<float> init(n), g(n), out(n);
  for (int64_t i = 0; i < n; ++i) {
    init[i] = static_cast<float>(i % 1000);
    g[i] = static_cast<float>(i % 3);
  }
  ASSERT_TRUE(c.Initialize(Header(0, 0, inc), init, 0, v1::WIRE_DTYPE_F32).ok());
  for (int64_t step = 0; step < 2; ++step) {
    bool pushed = false;
    absl::StatusOr<PullReply> r = grpc.Step(Header(0, step, inc), g, PullFor(0, 0, step + 1, inc),
                                            out, 0, v1::WIRE_DTYPE_F32, &pushed, {});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->global_step, step + 1);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_FLOAT_EQ(out[i], init[i] - 0.5f * static_cast<float>(step + 1) * g[i]) << i;
    }
  }
  EXPECT_EQ(ps.shard().Status().applied_pushes(), 2);
}

// A PushPull stream from the generated stubs: a corrupt chunk in a two-chunk
// push is refused whole (the step before it stays applied, nothing of the
// bad step is), and a step whose header message has no pull request waits
// for the message that has it.
TEST(GrpcShardServer, PushPullFromTheGeneratedStubsAndACorruptChunk) {
  TestShard ps(0, 1, "async", "");
  ShardClient c("ps-0", ps.address(), "");
  const uint64_t inc = c.Register(Reg(0), std::chrono::seconds(5))->incarnation();
  std::vector<float> init(kParams), g(kParams);
  for (int64_t i = 0; i < kParams; ++i) {
    init[i] = static_cast<float>(i);
    g[i] = 0.25f * static_cast<float>(i % 7);
  }
  ASSERT_TRUE(c.Initialize(Header(0, 0, inc), init, 0, v1::WIRE_DTYPE_F32).ok());
  std::unique_ptr<v1::ParameterServer::Stub> stub = v1::ParameterServer::NewStub(
      grpc::CreateChannel(ps.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<v1::PushMessage, v1::PullMessage>> stream =
      stub->PushPull(&ctx);
  // A step in two messages: the header with 600 values, then the rest with
  // the pull request.
  auto step = [&](int64_t clock, bool corrupt) {
    v1::PushMessage m;
    *m.mutable_header() = Header(0, clock, inc);
    EncodeChunk(std::span<const float>(g).first(600), 0, v1::WIRE_DTYPE_F32, m.mutable_chunk());
    ASSERT_TRUE(stream->Write(m));
    m.clear_header();
    EncodeChunk(std::span<const float>(g).subspan(600), 600, v1::WIRE_DTYPE_F32, m.mutable_chunk());
    if (corrupt) (*m.mutable_chunk()->mutable_data())[100] ^= 0x01;
    *m.mutable_pull() = PullFor(0, 0, clock + 1, inc);
    ASSERT_TRUE(stream->Write(m));
  };
  step(0, /*corrupt=*/false);
  v1::PullMessage m;
  std::vector<float> out(kParams);
  int64_t covered = 0;
  while (covered < kParams && stream->Read(&m)) {
    if (covered == 0) {
      EXPECT_EQ(m.global_step(), 1);
    }
    const int64_t len = static_cast<int64_t>(m.chunk().range().length());
    ASSERT_EQ(static_cast<int64_t>(m.chunk().range().offset()), covered);
    ASSERT_TRUE(DecodeChunk(m.chunk(), std::span<float>(out).subspan(covered, len)).ok());
    covered += len;
  }
  ASSERT_EQ(covered, kParams);
  for (int64_t i = 0; i < kParams; ++i) EXPECT_FLOAT_EQ(out[i], init[i] - 0.5f * g[i]) << i;

  step(1, /*corrupt=*/true);
  EXPECT_FALSE(stream->Read(&m));
  stream->WritesDone();
  const grpc::Status st = stream->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DATA_LOSS);
  EXPECT_THAT(st.error_message(), HasSubstr("chunk at offset 600 failed its checksum"));
  EXPECT_EQ(ps.shard().Status().global_step(), 1);
  EXPECT_EQ(ps.shard().Status().rejected_pushes(), 1);
  v1::PullRequest pr;
  pr.set_worker(0);
  ASSERT_TRUE(c.Pull(pr, out, 0).ok());
  for (int64_t i = 0; i < kParams; ++i) EXPECT_FLOAT_EQ(out[i], init[i] - 0.5f * g[i]) << i;
}

// A shard without PushPull (a server from before it) serves none of the
// worker's step transports: there is no falling back on Push and Pull
// calls, the first step fails at once, for good, naming the shard.
TEST(PsExchange, AShardWithoutPushPullFailsTheStepNamingIt) {
  TestShard ps(0, 1, "async", "", "", /*push_pull=*/false);
  RealClock clock;
  PsExchangeOptions o;
  o.ps_addresses = {ps.address()};
  o.initializer = true;
  o.mode = *ExchangeMode::Parse("async");
  o.peer_timeout_seconds = 10;
  o.total_steps = 10;
  PsExchange w(o, clock, [](const std::string&) {});
  std::vector<float> p(kParams, 2.0f), g(kParams, 1.0f);
  ASSERT_EQ(*w.Start(p), 0);  // Register, Initialize and Pull are served
  absl::StatusOr<int64_t> n = w.Step(0, g, p);
  EXPECT_EQ(n.status().code(), absl::StatusCode::kUnimplemented) << n.status();
  EXPECT_THAT(std::string(n.status().message()), HasSubstr("ps-0 (" + ps.address() + ")"));
  EXPECT_EQ(w.transport(0), StepTransportKind::kGrpcStream);
  EXPECT_EQ(ps.shard().Status().applied_pushes(), 0);
}

TEST(GrpcShardServer, Fp16OnTheWireStaysWithinHalfPrecision) {
  TestShard ps(0, 1, "async", "");
  ShardClient c("ps-0", ps.address(), "");
  const uint64_t inc = c.Register(Reg(0), std::chrono::seconds(5))->incarnation();
  std::vector<float> init(kParams), g(kParams);
  for (int64_t i = 0; i < kParams; ++i) {
    init[i] = std::sin(0.37f * i) * 3.0f;
    g[i] = std::cos(0.11f * i) * 1e-3f;
  }
  ASSERT_TRUE(c.Initialize(Header(0, 0, inc), init, 0, v1::WIRE_DTYPE_F16).ok());
  ASSERT_TRUE(Push(c, Header(0, 0, inc), g, 0, v1::WIRE_DTYPE_F16).ok());
  std::vector<float> out(kParams);
  v1::PullRequest pr;
  pr.set_worker(0);
  pr.set_dtype(v1::WIRE_DTYPE_F16);
  ASSERT_TRUE(c.Pull(pr, out, 0).ok());
  double max_rel = 0;
  for (int64_t i = 0; i < kParams; ++i) {
    const double want = init[i] - 0.5 * g[i];
    const double err = std::abs(out[i] - want);
    // Three roundings (init, gradient, pull), each <= 2^-11 relative.
    EXPECT_LE(err, 3.5 * 0x1.0p-11 * std::abs(want) + 1e-6) << i;
    if (std::abs(want) > 1e-3) max_rel = std::max(max_rel, err / std::abs(want));
  }
  EXPECT_GT(max_rel, 0.0) << "fp16 should introduce some error";
}

TEST(GrpcShardServer, CheckpointOnRequest) {
  const data::testing_util::TempDir tmp;  // own folder: runs in parallel share no files
  const std::string dir = tmp.File("ckpt");
  TestShard ps(0, 1, "sync", "", dir);
  ShardClient c("ps-0", ps.address(), "");
  const uint64_t inc = c.Register(Reg(0), std::chrono::seconds(5))->incarnation();
  // Nothing to save before the parameters exist.
  EXPECT_EQ(c.Checkpoint(std::chrono::seconds(5)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  std::vector<float> init(kParams, 2.0f);
  ASSERT_TRUE(c.Initialize(Header(0, 0, inc), init, 0, v1::WIRE_DTYPE_F32).ok());
  absl::StatusOr<v1::CheckpointResponse> r = c.Checkpoint(std::chrono::seconds(5));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->global_step(), 0);
  absl::StatusOr<exchange::CheckpointData> d = exchange::ReadCheckpoint(r->path());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->params, init);
}

TEST(PsExchange, TwoShardsServeOneVectorInParallel) {
  TestShard a(0, 2, "sync", "t"), b(1, 2, "sync", "t");
  RealClock clock;
  auto make = [&](int worker) {
    PsExchangeOptions o;
    o.ps_addresses = {a.address(), b.address()};
    o.worker = worker;
    o.initializer = worker == 0;
    o.token = "t";
    o.peer_timeout_seconds = 10;
    o.total_steps = 10;
    return std::make_unique<PsExchange>(o, clock, [](const std::string&) {});
  };
  auto w0 = make(0), w1 = make(1);
  std::vector<float> p0(kParams), p1(kParams, -1.0f), g(kParams);
  for (int64_t i = 0; i < kParams; ++i) p0[i] = static_cast<float>(i);
  absl::StatusOr<int64_t> s1;
  std::thread t([&] { s1 = w1->Start(p1); });  // waits for the initialiser
  ASSERT_EQ(*w0->Start(p0), 0);
  t.join();
  ASSERT_TRUE(s1.ok()) << s1.status();
  EXPECT_EQ(p1, p0);
  for (int64_t i = 0; i < kParams; ++i) g[i] = 1.0f;
  absl::StatusOr<int64_t> n1;
  std::thread t2([&] { n1 = w1->Step(0, g, p1); });
  absl::StatusOr<int64_t> n0 = w0->Step(0, g, p0);
  t2.join();
  ASSERT_TRUE(n0.ok() && n1.ok());
  EXPECT_EQ(*n0, 1);
  EXPECT_EQ(*n1, 1);
  EXPECT_EQ(p0, p1);
  EXPECT_FLOAT_EQ(p0[999], 999.0f - 0.5f);  // the second shard's range moved too
  EXPECT_EQ(a.shard().Status().global_step(), 1);
  EXPECT_EQ(b.shard().Status().global_step(), 1);
}

TEST(PsExchange, AnUnreachableShardEndsTheStepNamingIt) {
  RealClock clock;
  PsExchangeOptions o;
  o.ps_addresses = {"127.0.0.1:1"};  // nothing listens on port 1
  o.peer_timeout_seconds = 1;
  PsExchange ex(o, clock, [](const std::string&) {});
  std::vector<float> p(10);
  absl::StatusOr<int64_t> r = ex.Start(p);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("lost parameter server ps-0 (127.0.0.1:1)"));
}

}  // namespace
}  // namespace kubetrain::ps
