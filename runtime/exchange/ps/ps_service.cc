#include "runtime/exchange/ps/ps_service.h"

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/support/method_handler.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/exchange/ps/chunk_frame.h"
#include "runtime/exchange/ps/ps_refusal.h"
#include "runtime/exchange/ps/wire_codec.h"

namespace kubetrain::ps {

using exchange::FromGrpc;
using exchange::ToGrpc;

namespace {

using grpc::internal::RpcMethod;
using grpc::internal::RpcServiceMethod;

template <typename Req, typename Resp>
RpcServiceMethod* Unary(const char* name, PsService* service,
                        grpc::Status (PsService::*fn)(grpc::ServerContext*, const Req*, Resp*)) {
  return new RpcServiceMethod(name, RpcMethod::NORMAL_RPC,
                              new grpc::internal::RpcMethodHandler<PsService, Req, Resp>(
                                  [fn](PsService* s, grpc::ServerContext* ctx, const Req* req,
                                       Resp* resp) { return (s->*fn)(ctx, req, resp); },
                                  service));
}

RpcServiceMethod* Receive(const char* name, PsService* service,
                          grpc::Status (PsService::*fn)(grpc::ServerContext*,
                                                        grpc::ServerReader<grpc::ByteBuffer>*,
                                                        v1::PushResponse*)) {
  return new RpcServiceMethod(
      name, RpcMethod::CLIENT_STREAMING,
      new grpc::internal::ClientStreamingHandler<PsService, grpc::ByteBuffer, v1::PushResponse>(
          [fn](PsService* s, grpc::ServerContext* ctx, grpc::ServerReader<grpc::ByteBuffer>* r,
               v1::PushResponse* resp) { return (s->*fn)(ctx, r, resp); },
          service));
}

}  // namespace

PsService::PsService(PsShard& shard, std::string token, metrics::RuntimeMetrics* metrics)
    : shard_(shard), token_(std::move(token)), metrics_(metrics) {
  // gRPC owns the methods (grpc::Service deletes them).
  AddMethod(Unary(kPsRegisterMethod, this, &PsService::Register));
  AddMethod(Receive(kPsInitializeMethod, this, &PsService::Initialize));
  AddMethod(Receive(kPsPushMethod, this, &PsService::Push));
  AddMethod(new RpcServiceMethod(
      kPsPullMethod, RpcMethod::SERVER_STREAMING,
      new grpc::internal::ServerStreamingHandler<PsService, v1::PullRequest, grpc::ByteBuffer>(
          [](PsService* s, grpc::ServerContext* ctx, const v1::PullRequest* req,
             grpc::ServerWriter<grpc::ByteBuffer>* w) { return s->Pull(ctx, req, w); },
          this)));
  AddMethod(new RpcServiceMethod(
      kPsPushPullMethod, RpcMethod::BIDI_STREAMING,
      new grpc::internal::BidiStreamingHandler<PsService, grpc::ByteBuffer, grpc::ByteBuffer>(
          [](PsService* s, grpc::ServerContext* ctx,
             grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
            return s->PushPull(ctx, stream);
          },
          this)));
  AddMethod(Unary(kPsDoneMethod, this, &PsService::Done));
  AddMethod(Unary(kPsCheckpointMethod, this, &PsService::Checkpoint));
  AddMethod(Unary(kPsGetStatusMethod, this, &PsService::GetStatus));
}

grpc::Status PsService::CheckWriterToken(const grpc::ServerContext& ctx, const char* call) {
  grpc::Status s = exchange::CheckToken(ctx, token_);
  if (!s.ok()) {
    shard_.CountRejected(metrics::RejectReason::kBadToken,
                         absl::StrCat(call, " from ", ctx.peer(), ": ", s.error_message()));
  }
  return s;
}

grpc::Status PsService::Register(grpc::ServerContext* ctx, const v1::RegisterRequest* req,
                                 v1::RegisterResponse* resp) {
  if (grpc::Status s = CheckWriterToken(*ctx, "register"); !s.ok()) return s;
  absl::StatusOr<RegisterInfo> info =
      shard_.Register(req->worker(), static_cast<int64_t>(req->num_params()), req->worker_name());
  if (!info.ok()) return ToGrpc(info.status());
  const PsShardOptions& o = shard_.options();
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
  resp->set_data_plane_pipeline(data_port != 0 && shard_.pipelined());
  return grpc::Status::OK;
}

grpc::Status PsService::ReceiveInto(grpc::ServerContext* ctx,
                                    grpc::ServerReader<grpc::ByteBuffer>* reader, bool initialize,
                                    v1::PushResponse* resp) {
  if (grpc::Status s = CheckWriterToken(*ctx, "push"); !s.ok()) return s;
  grpc::ByteBuffer buffer;
  absl::StatusOr<ReceivedFrame> frame = absl::InvalidArgumentError("empty stream");
  if (reader->Read(&buffer)) frame = ReceivedFrame::ParsePush(buffer);
  return ReceivePush(
      std::move(frame), [reader](grpc::ByteBuffer* b) { return reader->Read(b); }, initialize,
      /*pull=*/nullptr, resp);
}

grpc::Status PsService::ReceivePush(absl::StatusOr<ReceivedFrame> frame,
                                    const std::function<bool(grpc::ByteBuffer*)>& read,
                                    bool initialize, std::optional<v1::PullRequest>* pull,
                                    v1::PushResponse* resp) {
  const bool whole_stream = pull == nullptr;
  grpc::ByteBuffer buffer;
  if (!frame.ok() || !frame->header().has_value()) {
    const std::string why =
        frame.ok() ? "stream without a header" : std::string(frame.status().message());
    shard_.CountRejected(metrics::RejectReason::kBadHeader, why);
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("first message must carry a header (", why, ")"));
  }
  const v1::PushHeader header = *frame->header();
  const uint64_t incarnation = shard_.options().incarnation;
  if (header.incarnation() != incarnation) {
    return ToGrpc(StaleIncarnationError(incarnation, header.incarnation()));
  }
  const Range range = shard_.range();
  absl::StatusOr<std::span<float>> staging =
      shard_.BeginStaging(header.worker(), header.step(), initialize);
  const bool duplicate = absl::IsAlreadyExists(staging.status());
  if (duplicate && whole_stream) {
    resp->set_accepted(false);  // duplicate of an accepted gradient: dropped
    resp->set_global_step(shard_.global_step());
    resp->set_incarnation(incarnation);
    return grpc::Status::OK;
  }
  if (!staging.ok() && !duplicate) {
    if (absl::IsInvalidArgument(staging.status())) {
      shard_.CountRejected(metrics::RejectReason::kUnknownWorker,
                           std::string(staging.status().message()));
    }
    return ToGrpc(staging.status());
  }
  // Chunks must tile this shard's range in order, each continuing where the
  // previous one ended. In a PushPull stream the push ends with the message
  // that carries the pull request (the next message is the next step's); a
  // duplicate's chunks are read and dropped there.
  absl::Status error;
  metrics::RejectReason reason = metrics::RejectReason::kBadRange;
  int64_t covered = 0;
  int64_t bytes = 0;
  int64_t nonfinite = 0;
  // The first message may carry the header alone.
  bool have = frame->has_chunk();
  if (!whole_stream && frame->pull().has_value()) {
    *pull = frame->pull();
    if (!have) error = absl::InvalidArgumentError("a PushPull step without chunks");
  } else if (!have && read(&buffer)) {
    frame = ReceivedFrame::ParsePush(buffer);
    have = true;
  }
  while (have && error.ok()) {
    if (!frame.ok()) {
      error = frame.status();
      reason = metrics::RejectReason::kBadChunk;
      break;
    }
    const int64_t off = frame->offset();
    const int64_t len = frame->length();
    if (off != range.offset + covered || len <= 0 || covered + len > range.length) {
      error = absl::InvalidArgumentError(
          absl::StrCat("chunk [", off, ", ", off + len, ") does not fit: shard ",
                       shard_.options().shard_index, " owns [", range.offset, ", ", range.end(),
                       ") and expected offset ", range.offset + covered));
      break;
    }
    if (!duplicate) {
      error = frame->DecodeInto(
          staging->subspan(static_cast<size_t>(covered), static_cast<size_t>(len)), &nonfinite);
      if (!error.ok()) reason = metrics::RejectReason::kBadChunk;
    }
    covered += len;
    bytes += static_cast<int64_t>(frame->data_bytes());
    if (!whole_stream && frame->pull().has_value()) {
      *pull = frame->pull();
      break;
    }
    have = read(&buffer);
    if (have) frame = ReceivedFrame::ParsePush(buffer);
  }
  if (error.ok() && covered != range.length) {
    error = absl::InvalidArgumentError(absl::StrCat("push covers ", covered, " of the ",
                                                    range.length, " elements shard ",
                                                    shard_.options().shard_index, " owns"));
  }
  if (error.ok() && !whole_stream) {
    if (!pull->has_value()) {
      error = absl::InvalidArgumentError("a PushPull step ended without its pull request");
      reason = metrics::RejectReason::kBadHeader;
    } else if ((*pull)->worker() != header.worker()) {
      error =
          absl::InvalidArgumentError(absl::StrCat("PushPull step of worker ", header.worker(),
                                                  " asks to pull for worker ", (*pull)->worker()));
      reason = metrics::RejectReason::kBadHeader;
    }
  }
  if (duplicate) {
    if (!error.ok()) return ToGrpc(error);
    resp->set_accepted(false);
    resp->set_global_step(shard_.global_step());
    resp->set_incarnation(incarnation);
    return grpc::Status::OK;
  }
  if (!error.ok()) {
    shard_.EndStaging(header.worker());
    shard_.CountRejected(reason, std::string(error.message()));
    return ToGrpc(error);
  }
  absl::Status commit;
  if (initialize) {
    absl::StatusOr<bool> took =
        shard_.CommitInitialize(header.worker(), header.step(), header.total_steps());
    commit = took.status();
    resp->set_accepted(took.ok() && *took);
  } else {
    absl::StatusOr<PushResult> r = shard_.CommitPush(header.worker(), header.step(), nonfinite);
    commit = r.status();
    if (r.ok()) resp->set_accepted(r->accepted);
  }
  shard_.EndStaging(header.worker());
  if (metrics_ != nullptr && !initialize) {
    metrics_->AddReceivedBytes(metrics::PeerRole::kWorker, bytes);
  }
  if (!commit.ok()) return ToGrpc(commit);
  resp->set_global_step(shard_.global_step());
  resp->set_incarnation(incarnation);
  return grpc::Status::OK;
}

grpc::Status PsService::Initialize(grpc::ServerContext* ctx,
                                   grpc::ServerReader<grpc::ByteBuffer>* reader,
                                   v1::PushResponse* resp) {
  return ReceiveInto(ctx, reader, /*initialize=*/true, resp);
}

grpc::Status PsService::Push(grpc::ServerContext* ctx, grpc::ServerReader<grpc::ByteBuffer>* reader,
                             v1::PushResponse* resp) {
  return ReceiveInto(ctx, reader, /*initialize=*/false, resp);
}

grpc::Status PsService::ReadFrames(grpc::ServerContext* ctx, const v1::PullRequest& req,
                                   std::shared_ptr<const PullFrames>* out) {
  const uint64_t incarnation = shard_.options().incarnation;
  if (req.incarnation() != 0 && req.incarnation() != incarnation) {
    return ToGrpc(StaleIncarnationError(incarnation, req.incarnation()));
  }
  const int worker = req.worker();
  if (worker < kObserver || worker >= shard_.options().num_workers) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("unknown worker id ", worker));
  }
  const Range range = shard_.range();
  if (range.length == 0) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "the shard has no layout yet: register first");
  }
  const v1::WireDType dtype =
      req.dtype() == v1::WIRE_DTYPE_UNSPECIFIED ? v1::WIRE_DTYPE_F32 : req.dtype();
  if (dtype != v1::WIRE_DTYPE_F32 && dtype != v1::WIRE_DTYPE_F16) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("unsupported wire dtype ", dtype));
  }
  // Encode the parameters straight from the shard, under its lock, unless
  // this version is already encoded (the other workers' pulls of a step).
  absl::StatusOr<PullResult> r = shard_.Read(
      worker, req.min_step(), req.clock(),
      [&](std::span<const float> params, const PullResult& pr) {
        std::lock_guard<std::mutex> lock(pull_mu_);
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
                                range.offset + off, dtype, &pull_pool_));
            f->bytes += len * static_cast<int64_t>(WireBytesPerElement(dtype));
          }
          pull_frames_ = std::move(f);
        }
        *out = pull_frames_;
      },
      [ctx] { return ctx->IsCancelled(); });
  return ToGrpc(r.status());
}

void PsService::CountSent(int worker, const PullFrames& frames) {
  if (metrics_ != nullptr) {
    metrics_->AddSentBytes(
        worker == kObserver ? metrics::PeerRole::kEvaluator : metrics::PeerRole::kWorker,
        frames.bytes);
  }
}

grpc::Status PsService::Pull(grpc::ServerContext* ctx, const v1::PullRequest* req,
                             grpc::ServerWriter<grpc::ByteBuffer>* writer) {
  if (grpc::Status s = exchange::CheckToken(*ctx, token_); !s.ok()) return s;
  std::shared_ptr<const PullFrames> frames;
  if (grpc::Status s = ReadFrames(ctx, *req, &frames); !s.ok()) return s;
  for (const grpc::ByteBuffer& frame : frames->frames) {
    if (!writer->Write(frame)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
  }
  CountSent(req->worker(), *frames);
  return grpc::Status::OK;
}

grpc::Status PsService::PushPull(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream) {
  if (grpc::Status s = CheckWriterToken(*ctx, "push"); !s.ok()) return s;
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
    CountSent(pull->worker(), *frames);
  }
  return grpc::Status::OK;
}

grpc::Status PsService::Done(grpc::ServerContext* ctx, const v1::DoneRequest* req,
                             v1::DoneResponse* resp) {
  if (grpc::Status s = exchange::CheckToken(*ctx, token_); !s.ok()) return s;
  resp->set_job_finished(shard_.Done(req->worker()));
  return grpc::Status::OK;
}

grpc::Status PsService::Checkpoint(grpc::ServerContext* ctx, const v1::CheckpointRequest* req,
                                   v1::CheckpointResponse* resp) {
  if (grpc::Status s = exchange::CheckToken(*ctx, token_); !s.ok()) return s;
  absl::StatusOr<std::string> path = shard_.WriteCheckpointNow();
  if (!path.ok()) return ToGrpc(path.status());
  resp->set_path(*path);
  resp->set_global_step(shard_.global_step());
  return grpc::Status::OK;
}

grpc::Status PsService::GetStatus(grpc::ServerContext* ctx, const v1::StatusRequest* req,
                                  v1::StatusResponse* resp) {
  if (grpc::Status s = exchange::CheckToken(*ctx, token_); !s.ok()) return s;
  *resp = shard_.Status();
  return grpc::Status::OK;
}

}  // namespace kubetrain::ps
