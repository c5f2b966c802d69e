#include "runtime/exchange/ps/shard_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/exchange/grpc_util.h"
#include "runtime/exchange/ps/grpc_frame.h"
#include "runtime/exchange/ps/grpc_methods.h"
#include "runtime/exchange/ps/pull_reader.h"
#include "runtime/exchange/ps/wire_values.h"

namespace kubetrain::ps {

using exchange::FromGrpc;

ShardClient::ShardClient(std::string name, std::string address, std::string token)
    : name_(std::move(name)),
      address_(std::move(address)),
      token_(std::move(token)),
      channel_(exchange::MakeRuntimeChannel(address_)),
      stub_(v1::ParameterServer::NewStub(channel_)),
      initialize_method_(kPsInitializeMethod, grpc::internal::RpcMethod::CLIENT_STREAMING,
                         channel_),
      pull_method_(kPsPullMethod, grpc::internal::RpcMethod::SERVER_STREAMING, channel_) {}

void ShardClient::Prepare(grpc::ClientContext* ctx) const { exchange::AddToken(ctx, token_); }

absl::StatusOr<v1::RegisterResponse> ShardClient::Register(const v1::RegisterRequest& req,
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

absl::StatusOr<v1::PushResponse> ShardClient::Initialize(const v1::PushHeader& header,
                                                         std::span<const float> values,
                                                         int64_t offset, v1::WireDType dtype) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::PushResponse resp;
  std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer(
      grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(
          channel_.get(), initialize_method_, &ctx, &resp));
  // A false write: the server ended the call; Finish says why.
  WritePushFrames(header, values, offset, dtype, &push_pool_, nullptr,
                  [&writer](const grpc::ByteBuffer& f) { return writer->Write(f); });
  writer->WritesDone();
  grpc::Status s = writer->Finish();
  if (!s.ok()) return FromGrpc(s);
  return resp;
}

absl::StatusOr<PullReply> ShardClient::Pull(const v1::PullRequest& req, std::span<float> out,
                                            int64_t offset) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(channel_.get(), pull_method_,
                                                                    &ctx, req));
  PullReply reply;
  bool any = false;
  absl::Status error = ReadPull(
      name_, [&](grpc::ByteBuffer* b) { return reader->Read(b); }, out, offset, &reply, &any);
  grpc::ByteBuffer rest;
  while (reader->Read(&rest)) {
    // Drain: frames beyond the range make the pull fail.
    if (error.ok()) {
      error = absl::DataLossError(
          absl::StrCat(name_, " sent a chunk out of order or beyond the range"));
    }
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) return FromGrpc(s);
  if (!error.ok()) return error;
  return reply;
}

absl::StatusOr<v1::DoneResponse> ShardClient::Done(int worker, std::chrono::milliseconds timeout) {
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

absl::StatusOr<v1::DoneResponse> ShardClient::Leave(int worker, const std::string& reason,
                                                    std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::DoneRequest req;
  req.set_worker(worker);
  req.set_leaving(true);
  req.set_reason(reason);
  v1::DoneResponse resp;
  grpc::Status s = stub_->Done(&ctx, req, &resp);
  if (!s.ok()) return FromGrpc(s);
  return resp;
}

absl::StatusOr<v1::StatusResponse> ShardClient::GetStatus(std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::StatusResponse resp;
  grpc::Status s = stub_->GetStatus(&ctx, v1::StatusRequest(), &resp);
  if (!s.ok()) return FromGrpc(s);
  return resp;
}

absl::StatusOr<v1::CheckpointResponse> ShardClient::Checkpoint(std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::CheckpointResponse resp;
  grpc::Status s = stub_->Checkpoint(&ctx, v1::CheckpointRequest(), &resp);
  if (!s.ok()) return FromGrpc(s);
  return resp;
}

}  // namespace kubetrain::ps
