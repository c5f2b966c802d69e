#include "runtime/exchange/ps/ps_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/exchange/ps/wire_codec.h"

namespace kubetrain::ps {

using exchange::FromGrpc;
using exchange::ToGrpc;

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
  return grpc::Status::OK;
}

grpc::Status PsService::ReceiveInto(grpc::ServerContext* ctx,
                                    grpc::ServerReader<v1::PushMessage>* reader, bool initialize,
                                    v1::PushResponse* resp) {
  if (grpc::Status s = CheckWriterToken(*ctx, "push"); !s.ok()) return s;
  v1::PushMessage msg;
  if (!reader->Read(&msg) || !msg.has_header()) {
    shard_.CountRejected(metrics::RejectReason::kBadHeader, "stream without a header");
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "first message must carry a header");
  }
  const v1::PushHeader header = msg.header();
  const uint64_t incarnation = shard_.options().incarnation;
  if (header.incarnation() != incarnation) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("parameter server restarted (incarnation ", incarnation,
                                     ", caller has ", header.incarnation(), "); re-register"));
  }
  absl::StatusOr<std::span<float>> staging =
      shard_.BeginStaging(header.worker(), header.step(), initialize);
  if (absl::IsAlreadyExists(staging.status())) {
    resp->set_accepted(false);  // duplicate of an accepted gradient: dropped
    resp->set_global_step(shard_.global_step());
    resp->set_incarnation(incarnation);
    return grpc::Status::OK;
  }
  if (!staging.ok()) {
    if (absl::IsInvalidArgument(staging.status())) {
      shard_.CountRejected(metrics::RejectReason::kUnknownWorker,
                           std::string(staging.status().message()));
    }
    return ToGrpc(staging.status());
  }
  const Range range = shard_.range();
  // Chunks must tile this shard's range in order, each continuing where the
  // previous one ended.
  absl::Status error;
  metrics::RejectReason reason = metrics::RejectReason::kBadRange;
  int64_t covered = 0;
  int64_t bytes = 0;
  bool have = msg.has_chunk() || reader->Read(&msg);
  while (have && error.ok()) {
    const v1::TensorChunk& c = msg.chunk();
    const int64_t off = static_cast<int64_t>(c.range().offset());
    const int64_t len = static_cast<int64_t>(c.range().length());
    if (off != range.offset + covered || len <= 0 || covered + len > range.length) {
      error = absl::InvalidArgumentError(
          absl::StrCat("chunk [", off, ", ", off + len, ") does not fit: shard ",
                       shard_.options().shard_index, " owns [", range.offset, ", ", range.end(),
                       ") and expected offset ", range.offset + covered));
      break;
    }
    error =
        DecodeChunk(c, staging->subspan(static_cast<size_t>(covered), static_cast<size_t>(len)));
    if (!error.ok()) reason = metrics::RejectReason::kBadChunk;
    covered += len;
    bytes += static_cast<int64_t>(c.data().size());
    have = reader->Read(&msg);
  }
  if (error.ok() && covered != range.length) {
    error = absl::InvalidArgumentError(absl::StrCat("push covers ", covered, " of the ",
                                                    range.length, " elements shard ",
                                                    shard_.options().shard_index, " owns"));
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
    absl::StatusOr<PushResult> r = shard_.CommitPush(header.worker(), header.step());
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
                                   grpc::ServerReader<v1::PushMessage>* reader,
                                   v1::PushResponse* resp) {
  return ReceiveInto(ctx, reader, /*initialize=*/true, resp);
}

grpc::Status PsService::Push(grpc::ServerContext* ctx, grpc::ServerReader<v1::PushMessage>* reader,
                             v1::PushResponse* resp) {
  return ReceiveInto(ctx, reader, /*initialize=*/false, resp);
}

grpc::Status PsService::Pull(grpc::ServerContext* ctx, const v1::PullRequest* req,
                             grpc::ServerWriter<v1::PullMessage>* writer) {
  if (grpc::Status s = exchange::CheckToken(*ctx, token_); !s.ok()) return s;
  const uint64_t incarnation = shard_.options().incarnation;
  if (req->incarnation() != 0 && req->incarnation() != incarnation) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("parameter server restarted (incarnation ", incarnation,
                                     ", caller has ", req->incarnation(), "); re-register"));
  }
  const int worker = req->worker();
  if (worker < kObserver || worker >= shard_.options().num_workers) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("unknown worker id ", worker));
  }
  const Range range = shard_.range();
  if (range.length == 0) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "the shard has no layout yet: register first");
  }
  AlignedBuffer* buf;
  {
    std::lock_guard<std::mutex> lock(pull_mu_);
    const size_t slot = static_cast<size_t>(worker + 1);
    if (pull_buffers_.size() <= slot) pull_buffers_.resize(slot + 1);
    if (!pull_buffers_[slot]) {
      pull_buffers_[slot] = std::make_unique<AlignedBuffer>(static_cast<size_t>(range.length));
    }
    buf = pull_buffers_[slot].get();
  }
  std::span<float> out(buf->data(), static_cast<size_t>(range.length));
  absl::StatusOr<PullResult> r =
      shard_.Pull(worker, req->min_step(), req->clock(), out, [ctx] { return ctx->IsCancelled(); });
  if (!r.ok()) return ToGrpc(r.status());
  const v1::WireDType dtype =
      req->dtype() == v1::WIRE_DTYPE_UNSPECIFIED ? v1::WIRE_DTYPE_F32 : req->dtype();
  v1::PullMessage msg;
  int64_t bytes = 0;
  for (int64_t off = 0; off < range.length; off += kChunkElements) {
    msg.Clear();
    if (off == 0) {
      msg.set_global_step(r->global_step);
      msg.set_incarnation(incarnation);
      msg.set_finished(r->finished);
    }
    const int64_t n = std::min(kChunkElements, range.length - off);
    EncodeChunk(out.subspan(static_cast<size_t>(off), static_cast<size_t>(n)), range.offset + off,
                dtype, msg.mutable_chunk());
    bytes += static_cast<int64_t>(msg.chunk().data().size());
    if (!writer->Write(msg)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
  }
  if (metrics_ != nullptr) {
    metrics_->AddSentBytes(
        worker == kObserver ? metrics::PeerRole::kEvaluator : metrics::PeerRole::kWorker, bytes);
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
