#include "runtime/exchange/ps/grpc_shard_server.h"

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/support/method_handler.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/exchange/ps/grpc_frame.h"
#include "runtime/exchange/ps/wire_values.h"

namespace kubetrain::ps {

using exchange::FromGrpc;
using exchange::ToGrpc;

namespace {

using grpc::internal::RpcMethod;
using grpc::internal::RpcServiceMethod;

template <typename Req, typename Resp>
RpcServiceMethod* Unary(const char* name, GrpcShardServer* service,
                        grpc::Status (GrpcShardServer::*fn)(grpc::ServerContext*, const Req*,
                                                            Resp*)) {
  return new RpcServiceMethod(name, RpcMethod::NORMAL_RPC,
                              new grpc::internal::RpcMethodHandler<GrpcShardServer, Req, Resp>(
                                  [fn](GrpcShardServer* s, grpc::ServerContext* ctx, const Req* req,
                                       Resp* resp) { return (s->*fn)(ctx, req, resp); },
                                  service));
}

RpcServiceMethod* Receive(const char* name, GrpcShardServer* service,
                          grpc::Status (GrpcShardServer::*fn)(grpc::ServerContext*,
                                                              grpc::ServerReader<grpc::ByteBuffer>*,
                                                              v1::PushResponse*)) {
  return new RpcServiceMethod(
      name, RpcMethod::CLIENT_STREAMING,
      new grpc::internal::ClientStreamingHandler<GrpcShardServer, grpc::ByteBuffer,
                                                 v1::PushResponse>(
          [fn](GrpcShardServer* s, grpc::ServerContext* ctx,
               grpc::ServerReader<grpc::ByteBuffer>* r,
               v1::PushResponse* resp) { return (s->*fn)(ctx, r, resp); },
          service));
}

// The job token the call carries (empty when none).
absl::string_view PresentedToken(const grpc::ServerContext& ctx) {
  const auto& md = ctx.client_metadata();
  auto it = md.find(exchange::kTokenMetadataKey);
  if (it == md.end()) return {};
  return absl::string_view(it->second.data(), it->second.size());
}

}  // namespace

GrpcShardServer::GrpcShardServer(ShardSession& session) : session_(session) {
  // gRPC owns the methods (grpc::Service deletes them).
  AddMethod(Unary(kPsRegisterMethod, this, &GrpcShardServer::Register));
  AddMethod(Receive(kPsInitializeMethod, this, &GrpcShardServer::Initialize));
  AddMethod(Receive(kPsPushMethod, this, &GrpcShardServer::Push));
  AddMethod(new RpcServiceMethod(
      kPsPullMethod, RpcMethod::SERVER_STREAMING,
      new grpc::internal::ServerStreamingHandler<GrpcShardServer, v1::PullRequest,
                                                 grpc::ByteBuffer>(
          [](GrpcShardServer* s, grpc::ServerContext* ctx, const v1::PullRequest* req,
             grpc::ServerWriter<grpc::ByteBuffer>* w) { return s->Pull(ctx, req, w); },
          this)));
  AddMethod(new RpcServiceMethod(
      kPsPushPullMethod, RpcMethod::BIDI_STREAMING,
      new grpc::internal::BidiStreamingHandler<GrpcShardServer, grpc::ByteBuffer, grpc::ByteBuffer>(
          [](GrpcShardServer* s, grpc::ServerContext* ctx,
             grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
            return s->PushPull(ctx, stream);
          },
          this)));
  AddMethod(Unary(kPsDoneMethod, this, &GrpcShardServer::Done));
  AddMethod(Unary(kPsCheckpointMethod, this, &GrpcShardServer::Checkpoint));
  AddMethod(Unary(kPsGetStatusMethod, this, &GrpcShardServer::GetStatus));
}

grpc::Status GrpcShardServer::AdmitWriter(const grpc::ServerContext& ctx, const char* call) {
  return ToGrpc(
      session_.AdmitWriter(PresentedToken(ctx), absl::StrCat(call, " from ", ctx.peer())));
}

grpc::Status GrpcShardServer::AdmitReader(const grpc::ServerContext& ctx) {
  return ToGrpc(session_.AdmitReader(PresentedToken(ctx)));
}

grpc::Status GrpcShardServer::Register(grpc::ServerContext* ctx, const v1::RegisterRequest* req,
                                       v1::RegisterResponse* resp) {
  if (grpc::Status s = AdmitWriter(*ctx, "register"); !s.ok()) return s;
  PsShard& shard = session_.shard();
  absl::StatusOr<RegisterInfo> info = shard.Register(
      req->worker(), static_cast<int64_t>(req->num_params()), req->worker_name(), req->clock());
  if (!info.ok()) return ToGrpc(info.status());
  const PsShardOptions& o = shard.options();
  resp->set_incarnation(o.incarnation);
  resp->set_shard_index(o.shard_index);
  resp->set_num_shards(o.num_shards);
  resp->mutable_range()->set_offset(static_cast<uint64_t>(info->range.offset));
  resp->mutable_range()->set_length(static_cast<uint64_t>(info->range.length));
  resp->set_initialized(info->initialized);
  resp->set_global_step(info->global_step);
  resp->set_worker_clock(info->worker_clock);
  resp->set_mode(o.mode.ToString());
  const int data_port = data_port_;
  resp->set_data_port(static_cast<uint32_t>(data_port));
  resp->set_data_plane_fp16(data_port != 0 && data_plane_fp16_);
  resp->set_data_plane_pipeline(data_port != 0 && shard.pipelined());
  resp->set_restored_from_checkpoint(info->restored_from_checkpoint);
  resp->set_initialized_by(info->initialized_by);
  resp->set_workers_counted(info->workers_counted);
  return grpc::Status::OK;
}

grpc::Status GrpcShardServer::ReceiveInto(grpc::ServerContext* ctx,
                                          grpc::ServerReader<grpc::ByteBuffer>* reader,
                                          bool initialize, v1::PushResponse* resp) {
  if (grpc::Status s = AdmitWriter(*ctx, "push"); !s.ok()) return s;
  grpc::ByteBuffer buffer;
  absl::StatusOr<ReceivedFrame> frame = absl::InvalidArgumentError("empty stream");
  if (reader->Read(&buffer)) frame = ReceivedFrame::ParsePush(buffer);
  return ReceivePush(
      std::move(frame), [reader](grpc::ByteBuffer* b) { return reader->Read(b); }, initialize,
      /*pull=*/nullptr, resp);
}

grpc::Status GrpcShardServer::ReceivePush(absl::StatusOr<ReceivedFrame> frame,
                                          const std::function<bool(grpc::ByteBuffer*)>& read,
                                          bool initialize, std::optional<v1::PullRequest>* pull,
                                          v1::PushResponse* resp) {
  const bool whole_stream = pull == nullptr;
  if (!frame.ok() || !frame->header().has_value()) {
    const std::string why =
        frame.ok() ? "stream without a header" : std::string(frame.status().message());
    session_.Reject(metrics::RejectReason::kBadHeader, absl::InvalidArgumentError(why))
        .IgnoreError();
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("first message must carry a header (", why, ")"));
  }
  const v1::PushHeader& header = *frame->header();
  PushHead head;
  head.worker = header.worker();
  head.step = header.step();
  head.incarnation = header.incarnation();
  head.initialize = initialize;
  head.total_steps = header.total_steps();
  head.ends_with_pull = !whole_stream;
  absl::StatusOr<StagedPush> push = session_.BeginPush(head);
  if (!push.ok()) return ToGrpc(push.status());
  const auto answer = [&](const PushAnswer& a) {
    resp->set_accepted(a.accepted);
    resp->set_global_step(a.global_step);
    resp->set_incarnation(a.incarnation);
    return grpc::Status::OK;
  };
  // A duplicate of an accepted gradient is dropped; a whole stream of it
  // need not be read.
  if (push->duplicate() && whole_stream) return answer(push->Drop());
  // In a PushPull stream the push ends with the message that carries the
  // pull request (the next message is the next step's). The first message
  // may carry the header alone.
  grpc::ByteBuffer buffer;
  bool have = frame->has_chunk();
  if (!have) {
    if (!whole_stream && frame->pull().has_value()) {
      *pull = frame->pull();
      push->PullArrived((*pull)->worker());
    } else if (read(&buffer)) {
      frame = ReceivedFrame::ParsePush(buffer);
      have = true;
    }
  }
  while (have) {
    if (!frame.ok()) {
      push->Fail(frame.status(), metrics::RejectReason::kBadChunk).IgnoreError();
      break;
    }
    absl::StatusOr<std::span<float>> to = push->Place(frame->offset(), frame->length());
    if (!to.ok()) break;
    int64_t nonfinite = 0;
    if (!to->empty()) {
      if (absl::Status s = frame->DecodeInto(*to, &nonfinite); !s.ok()) {
        push->Fail(s, metrics::RejectReason::kBadChunk).IgnoreError();
        break;
      }
    }
    if (!push->Arrived(nonfinite, static_cast<int64_t>(frame->data_bytes())).ok()) break;
    if (!whole_stream && frame->pull().has_value()) {
      *pull = frame->pull();
      push->PullArrived((*pull)->worker());
      break;
    }
    have = read(&buffer);
    if (have) frame = ReceivedFrame::ParsePush(buffer);
  }
  absl::StatusOr<PushAnswer> committed = push->Commit();
  if (!committed.ok()) return ToGrpc(committed.status());
  return answer(*committed);
}

grpc::Status GrpcShardServer::Initialize(grpc::ServerContext* ctx,
                                         grpc::ServerReader<grpc::ByteBuffer>* reader,
                                         v1::PushResponse* resp) {
  return ReceiveInto(ctx, reader, /*initialize=*/true, resp);
}

grpc::Status GrpcShardServer::Push(grpc::ServerContext* ctx,
                                   grpc::ServerReader<grpc::ByteBuffer>* reader,
                                   v1::PushResponse* resp) {
  return ReceiveInto(ctx, reader, /*initialize=*/false, resp);
}

grpc::Status GrpcShardServer::ReadFrames(grpc::ServerContext* ctx, const v1::PullRequest& req,
                                         std::shared_ptr<const PullFrames>* out) {
  const v1::WireDType dtype =
      req.dtype() == v1::WIRE_DTYPE_UNSPECIFIED ? v1::WIRE_DTYPE_F32 : req.dtype();
  if (dtype != v1::WIRE_DTYPE_F32 && dtype != v1::WIRE_DTYPE_F16) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("unsupported wire dtype ", dtype));
  }
  PullAsk ask;
  ask.worker = req.worker();
  ask.incarnation = req.incarnation();
  ask.min_step = req.min_step();
  ask.clock = req.clock();
  const uint64_t incarnation = session_.incarnation();
  const int64_t range_offset = session_.range().offset;
  // Encode the parameters straight from the shard, under its lock, unless
  // this version is already encoded (the other workers' pulls of a step).
  absl::StatusOr<PullResult> r = session_.Read(
      ask,
      [&](std::span<const float> params, const PullResult& pr) {
        absl::MutexLock lock(&pull_mu_);
        if (pull_frames_ == nullptr || pull_frames_->version != pr.version ||
            pull_frames_->dtype != dtype || pull_frames_->finished != pr.finished) {
          auto f = std::make_shared<PullFrames>();
          f->version = pr.version;
          f->dtype = dtype;
          f->finished = pr.finished;
          const int64_t n = static_cast<int64_t>(params.size());
          PullFrameHead head{pr.global_step, incarnation, pr.finished};
          for (int64_t off = 0; off < n; off += kChunkElements) {
            const int64_t len = std::min(kChunkElements, n - off);
            f->frames.push_back(
                EncodePullFrame(off == 0 ? &head : nullptr,
                                params.subspan(static_cast<size_t>(off), static_cast<size_t>(len)),
                                range_offset + off, dtype, &pull_pool_));
            f->bytes += len * static_cast<int64_t>(WireBytesPerElement(dtype));
          }
          pull_frames_ = std::move(f);
        }
        *out = pull_frames_;
      },
      [ctx] { return ctx->IsCancelled(); });
  return ToGrpc(r.status());
}

grpc::Status GrpcShardServer::Pull(grpc::ServerContext* ctx, const v1::PullRequest* req,
                                   grpc::ServerWriter<grpc::ByteBuffer>* writer) {
  if (grpc::Status s = AdmitReader(*ctx); !s.ok()) return s;
  std::shared_ptr<const PullFrames> frames;
  if (grpc::Status s = ReadFrames(ctx, *req, &frames); !s.ok()) return s;
  for (const grpc::ByteBuffer& frame : frames->frames) {
    if (!writer->Write(frame)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
  }
  session_.CountSent(req->worker(), frames->bytes);
  return grpc::Status::OK;
}

grpc::Status GrpcShardServer::PushPull(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
  if (grpc::Status s = AdmitWriter(*ctx, "push"); !s.ok()) return s;
  grpc::ByteBuffer buffer;
  auto read = [stream](grpc::ByteBuffer* b) { return stream->Read(b); };
  // One step per turn, until the worker closes its side.
  while (stream->Read(&buffer)) {
    std::optional<v1::PullRequest> pull;
    v1::PushResponse resp;
    if (grpc::Status s =
            ReceivePush(ReceivedFrame::ParsePush(buffer), read, /*initialize=*/false, &pull, &resp);
        !s.ok()) {
      return s;
    }
    std::shared_ptr<const PullFrames> frames;
    if (grpc::Status s = ReadFrames(ctx, *pull, &frames); !s.ok()) return s;
    for (const grpc::ByteBuffer& f : frames->frames) {
      if (!stream->Write(f)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
    }
    session_.CountSent(pull->worker(), frames->bytes);
  }
  return grpc::Status::OK;
}

grpc::Status GrpcShardServer::Done(grpc::ServerContext* ctx, const v1::DoneRequest* req,
                                   v1::DoneResponse* resp) {
  if (grpc::Status s = AdmitReader(*ctx); !s.ok()) return s;
  resp->set_job_finished(req->leaving() ? session_.shard().Leave(req->worker(), req->reason())
                                        : session_.shard().Done(req->worker()));
  return grpc::Status::OK;
}

grpc::Status GrpcShardServer::Checkpoint(grpc::ServerContext* ctx, const v1::CheckpointRequest* req,
                                         v1::CheckpointResponse* resp) {
  if (grpc::Status s = AdmitReader(*ctx); !s.ok()) return s;
  absl::StatusOr<std::string> path = session_.shard().WriteCheckpointNow();
  if (!path.ok()) return ToGrpc(path.status());
  resp->set_path(*path);
  resp->set_global_step(session_.shard().global_step());
  return grpc::Status::OK;
}

grpc::Status GrpcShardServer::GetStatus(grpc::ServerContext* ctx, const v1::StatusRequest* req,
                                        v1::StatusResponse* resp) {
  if (grpc::Status s = AdmitReader(*ctx); !s.ok()) return s;
  *resp = session_.shard().Status();
  return grpc::Status::OK;
}

}  // namespace kubetrain::ps
