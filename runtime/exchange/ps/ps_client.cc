#include "runtime/exchange/ps/ps_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/exchange/grpc_util.h"
#include "runtime/exchange/ps/chunk_frame.h"
#include "runtime/exchange/ps/ps_service.h"
#include "runtime/exchange/ps/wire_codec.h"

namespace kubetrain::ps {

using exchange::FromGrpc;
using exchange::MakeRuntimeChannel;

PsShardClient::PsShardClient(std::string name, std::string address, std::string token)
    : name_(std::move(name)),
      address_(std::move(address)),
      token_(std::move(token)),
      channel_(MakeRuntimeChannel(address_)),
      stub_(v1::ParameterServer::NewStub(channel_)),
      initialize_method_(kPsInitializeMethod, grpc::internal::RpcMethod::CLIENT_STREAMING,
                         channel_),
      push_method_(kPsPushMethod, grpc::internal::RpcMethod::CLIENT_STREAMING, channel_),
      pull_method_(kPsPullMethod, grpc::internal::RpcMethod::SERVER_STREAMING, channel_) {}

void PsShardClient::Prepare(grpc::ClientContext* ctx) const { exchange::AddToken(ctx, token_); }

absl::StatusOr<v1::RegisterResponse> PsShardClient::Register(const v1::RegisterRequest& req,
                                                             std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::RegisterResponse resp;
  grpc::Status s = stub_->Register(&ctx, req, &resp);
  if (!s.ok()) return FromGrpc(s);
  return resp;
}

absl::StatusOr<v1::PushResponse> PsShardClient::Send(bool initialize, const v1::PushHeader& header,
                                                     std::span<const float> values, int64_t offset,
                                                     v1::WireDType dtype) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::PushResponse resp;
  std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer(
      grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(
          channel_.get(), initialize ? initialize_method_ : push_method_, &ctx, &resp));
  const int64_t n = static_cast<int64_t>(values.size());
  for (int64_t off = 0; off < n; off += kChunkElements) {
    const int64_t len = std::min(kChunkElements, n - off);
    const grpc::ByteBuffer frame =
        EncodePushFrame(off == 0 ? &header : nullptr,
                        values.subspan(static_cast<size_t>(off), static_cast<size_t>(len)),
                        offset + off, dtype, &push_pool_);
    if (!writer->Write(frame)) break;  // the server ended the call; Finish says why
  }
  writer->WritesDone();
  grpc::Status s = writer->Finish();
  if (!s.ok()) return FromGrpc(s);
  return resp;
}

absl::StatusOr<PullReply> PsShardClient::Pull(const v1::PullRequest& req, std::span<float> out,
                                              int64_t offset) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(channel_.get(), pull_method_,
                                                                    &ctx, req));
  grpc::ByteBuffer buffer;
  PullReply reply;
  int64_t covered = 0;
  absl::Status error;
  bool first = true;
  while (reader->Read(&buffer)) {
    if (!error.ok()) continue;  // drain
    absl::StatusOr<ReceivedFrame> frame = ReceivedFrame::ParsePull(buffer);
    if (!frame.ok()) {
      error = absl::DataLossError(absl::StrCat(name_, ": ", frame.status().message()));
      continue;
    }
    if (first) {
      reply.global_step = frame->pull_head().global_step;
      reply.incarnation = frame->pull_head().incarnation;
      reply.finished = frame->pull_head().finished;
      first = false;
    }
    const int64_t off = frame->offset() - offset;
    const int64_t len = frame->length();
    if (off != covered || len < 0 || covered + len > static_cast<int64_t>(out.size())) {
      error = absl::DataLossError(absl::StrCat(name_, " sent chunk at ", off + offset,
                                               " out of order or beyond the range"));
      continue;
    }
    error = frame->DecodeInto(out.subspan(static_cast<size_t>(off), static_cast<size_t>(len)),
                              /*nonfinite=*/nullptr);
    covered += len;
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) return FromGrpc(s);
  if (!error.ok()) return error;
  if (covered != static_cast<int64_t>(out.size())) {
    return absl::DataLossError(
        absl::StrCat(name_, " sent ", covered, " of ", out.size(), " parameters"));
  }
  return reply;
}

absl::StatusOr<v1::DoneResponse> PsShardClient::Done(int worker,
                                                     std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::DoneRequest req;
  req.set_worker(worker);
  v1::DoneResponse resp;
  grpc::Status s = stub_->Done(&ctx, req, &resp);
  if (!s.ok()) return FromGrpc(s);
  return resp;
}

absl::StatusOr<v1::StatusResponse> PsShardClient::GetStatus(std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::StatusResponse resp;
  grpc::Status s = stub_->GetStatus(&ctx, v1::StatusRequest(), &resp);
  if (!s.ok()) return FromGrpc(s);
  return resp;
}

absl::StatusOr<v1::CheckpointResponse> PsShardClient::Checkpoint(
    std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::CheckpointResponse resp;
  grpc::Status s = stub_->Checkpoint(&ctx, v1::CheckpointRequest(), &resp);
  if (!s.ok()) return FromGrpc(s);
  return resp;
}

}  // namespace kubetrain::ps
