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
      pull_method_(kPsPullMethod, grpc::internal::RpcMethod::SERVER_STREAMING, channel_),
      push_pull_method_(kPsPushPullMethod, grpc::internal::RpcMethod::BIDI_STREAMING, channel_),
      data_(name_, address_, token_) {}

// Cancelled, not closed: a destructor must not wait on a server that may be gone.
PsShardClient::~PsShardClient() { (void)EndPushPull(StreamEnd::kCancel); }

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
  data_.SetPort(static_cast<int>(resp.data_port()));
  data_fp16_ = resp.data_plane_fp16();
  data_pipeline_ = resp.data_plane_pipeline();
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

template <typename Next>
absl::Status PsShardClient::ReadPull(Next next, std::span<float> out, int64_t offset,
                                     PullReply* reply, bool* any) {
  grpc::ByteBuffer buffer;
  int64_t covered = 0;
  const int64_t want = static_cast<int64_t>(out.size());
  // Reads until the range is covered; a Pull call then ends, a PushPull
  // stream goes on with the next step.
  while (covered < want && next(&buffer)) {
    *any = true;
    absl::StatusOr<ReceivedFrame> frame = ReceivedFrame::ParsePull(buffer);
    if (!frame.ok()) {
      return absl::DataLossError(absl::StrCat(name_, ": ", frame.status().message()));
    }
    if (covered == 0) {
      reply->global_step = frame->pull_head().global_step;
      reply->incarnation = frame->pull_head().incarnation;
      reply->finished = frame->pull_head().finished;
    }
    const int64_t off = frame->offset() - offset;
    const int64_t len = frame->length();
    if (off != covered || len < 0 || covered + len > want) {
      return absl::DataLossError(absl::StrCat(name_, " sent chunk at ", off + offset,
                                              " out of order or beyond the range"));
    }
    if (absl::Status s = frame->DecodeInto(
            out.subspan(static_cast<size_t>(off), static_cast<size_t>(len)), /*nonfinite=*/nullptr);
        !s.ok()) {
      return s;
    }
    covered += len;
  }
  if (covered != want) {
    return absl::DataLossError(absl::StrCat(name_, " sent ", covered, " of ", want, " parameters"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PullReply> PsShardClient::Pull(const v1::PullRequest& req, std::span<float> out,
                                              int64_t offset) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(channel_.get(), pull_method_,
                                                                    &ctx, req));
  PullReply reply;
  bool any = false;
  absl::Status error =
      ReadPull([&](grpc::ByteBuffer* b) { return reader->Read(b); }, out, offset, &reply, &any);
  grpc::ByteBuffer rest;
  while (reader->Read(&rest)) {
    // Drain: frames beyond the range make the pull fail, as before.
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

absl::Status PsShardClient::EndPushPull(StreamEnd how) {
  if (stream_ == nullptr) return absl::OkStatus();
  if (how == StreamEnd::kClose) stream_->WritesDone();
  // Cancelling a stream the server has already ended would replace its
  // status with CANCELLED.
  if (how == StreamEnd::kCancel) stream_ctx_->TryCancel();
  // Finish needs every message read.
  grpc::ByteBuffer rest;
  while (stream_->Read(&rest)) {
  }
  const grpc::Status s = stream_->Finish();
  stream_.reset();
  stream_ctx_.reset();
  return FromGrpc(s);
}

void PsShardClient::ClosePushPull() {
  (void)EndPushPull(StreamEnd::kClose);
  data_.Close();
}

// A data-plane step that waits longer than this asks the shard whether it
// restarted; a sync barrier normally releases within milliseconds, so a
// healthy job rarely asks at all.
constexpr std::chrono::seconds kAskAfter(1);
constexpr std::chrono::milliseconds kAnswerWithin(800);

exchange::IoCheck PsShardClient::StillTheSameShard(uint64_t incarnation) {
  auto next = std::chrono::steady_clock::now() + kAskAfter;
  return [this, incarnation, next]() mutable -> absl::Status {
    if (std::chrono::steady_clock::now() < next) return absl::OkStatus();
    absl::StatusOr<v1::StatusResponse> st = GetStatus(kAnswerWithin);
    next = std::chrono::steady_clock::now() + kAskAfter;
    // No answer says nothing: the link may be down while the shard waits
    // too; keepalive and the peer timeout decide that case.
    if (!st.ok() || st->incarnation() == incarnation) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat(name_, " restarted (incarnation ", incarnation,
                                               ", now ", st->incarnation(),
                                               ") while this step waited on it"));
  };
}

absl::StatusOr<PullReply> PsShardClient::PushPull(const v1::PushHeader& header,
                                                  std::span<const float> values,
                                                  const v1::PullRequest& pull, std::span<float> out,
                                                  int64_t offset, v1::WireDType dtype, bool* pushed,
                                                  const std::function<void()>& written) {
  *pushed = false;
  if (values.empty() || out.empty()) {
    return absl::InvalidArgumentError("PushPull of an empty range");
  }
  if (data_.active() &&
      (dtype == v1::WIRE_DTYPE_F32 || (dtype == v1::WIRE_DTYPE_F16 && data_fp16_) ||
       dtype == v1::WIRE_DTYPE_UNSPECIFIED)) {
    absl::StatusOr<PullReply> r = data_.PushPull(
        header, values, pull, out, offset, pushed, written, StillTheSameShard(header.incarnation()),
        dtype == v1::WIRE_DTYPE_F16 ? data_plane::DType::kF16 : data_plane::DType::kF32,
        // A single chunk has nothing to overlap.
        data_pipeline_ && static_cast<int64_t>(values.size()) >
                              data_plane::ChunkValues(static_cast<int64_t>(values.size())));
    // Not active any more: the data port was unreachable; go on over gRPC.
    if (r.ok() || data_.active()) return r;
  }
  if (stream_ == nullptr) {
    stream_ctx_ = std::make_unique<grpc::ClientContext>();
    Prepare(stream_ctx_.get());
    stream_.reset(
        grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
            channel_.get(), push_pull_method_, stream_ctx_.get()));
  }
  // On failure, the stream's own status says more than a failed write or a
  // short read (the server's error, or the transport's).
  bool ended = false;  // the server ended the stream
  auto fail = [&](absl::Status local) -> absl::Status {
    const absl::Status remote = EndPushPull(ended ? StreamEnd::kEnded : StreamEnd::kCancel);
    if (!remote.ok() && (ended || !absl::IsCancelled(remote))) return remote;
    return local.ok() ? absl::UnavailableError(absl::StrCat(name_, ": PushPull stream ended"))
                      : local;
  };
  const int64_t n = static_cast<int64_t>(values.size());
  for (int64_t off = 0; off < n; off += kChunkElements) {
    const int64_t len = std::min(kChunkElements, n - off);
    // The header opens the step's push; the pull request closes it.
    const grpc::ByteBuffer frame =
        EncodePushFrame(off == 0 ? &header : nullptr,
                        values.subspan(static_cast<size_t>(off), static_cast<size_t>(len)),
                        offset + off, dtype, &push_pool_, off + len == n ? &pull : nullptr);
    if (!stream_->Write(frame)) {
      ended = true;
      return fail(absl::OkStatus());
    }
  }
  if (written) written();
  PullReply reply;
  bool any = false;
  absl::Status error = ReadPull(
      [&](grpc::ByteBuffer* b) {
        ended = !stream_->Read(b);
        return !ended;
      },
      out, offset, &reply, &any);
  *pushed = any;
  if (!error.ok() || !any) return fail(error);
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
