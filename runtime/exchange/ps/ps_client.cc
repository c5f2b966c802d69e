#include "runtime/exchange/ps/ps_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/exchange/grpc_util.h"
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
      stub_(v1::ParameterServer::NewStub(channel_)) {}

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
  std::unique_ptr<grpc::ClientWriter<v1::PushMessage>> writer =
      initialize ? stub_->Initialize(&ctx, &resp) : stub_->Push(&ctx, &resp);
  v1::PushMessage msg;
  *msg.mutable_header() = header;
  const int64_t n = static_cast<int64_t>(values.size());
  for (int64_t off = 0; off < n; off += kChunkElements) {
    const int64_t len = std::min(kChunkElements, n - off);
    EncodeChunk(values.subspan(static_cast<size_t>(off), static_cast<size_t>(len)), offset + off,
                dtype, msg.mutable_chunk());
    if (!writer->Write(msg)) break;  // the server ended the call; Finish says why
    msg.clear_header();
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
  std::unique_ptr<grpc::ClientReader<v1::PullMessage>> reader = stub_->Pull(&ctx, req);
  v1::PullMessage msg;
  PullReply reply;
  int64_t covered = 0;
  absl::Status error;
  bool first = true;
  while (reader->Read(&msg)) {
    if (first) {
      reply.global_step = msg.global_step();
      reply.incarnation = msg.incarnation();
      reply.finished = msg.finished();
      first = false;
    }
    if (!error.ok()) continue;  // drain
    const int64_t off = static_cast<int64_t>(msg.chunk().range().offset()) - offset;
    const int64_t len = static_cast<int64_t>(msg.chunk().range().length());
    if (off != covered || covered + len > static_cast<int64_t>(out.size())) {
      error = absl::DataLossError(absl::StrCat(name_, " sent chunk at ", off + offset,
                                               " out of order or beyond the range"));
      continue;
    }
    error =
        DecodeChunk(msg.chunk(), out.subspan(static_cast<size_t>(off), static_cast<size_t>(len)));
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
