#include "runtime/exchange/ps/grpc_step_transport.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/exchange/grpc_util.h"
#include "runtime/exchange/ps/grpc_methods.h"
#include "runtime/exchange/ps/pull_reader.h"
#include "runtime/exchange/ps/wire_values.h"

namespace kubetrain::ps {

GrpcStepTransport::GrpcStepTransport(ShardClient& shard)
    : shard_(shard),
      push_pull_method_(kPsPushPullMethod, grpc::internal::RpcMethod::BIDI_STREAMING,
                        shard.channel()) {}

GrpcStepTransport::~GrpcStepTransport() { (void)EndStream(StreamEnd::kCancel); }

absl::Status GrpcStepTransport::EndStream(StreamEnd how) {
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
  return exchange::FromGrpc(s);
}

void GrpcStepTransport::Close() { (void)EndStream(StreamEnd::kClose); }

absl::StatusOr<PullReply> GrpcStepTransport::Step(const v1::PushHeader& header,
                                                  std::span<const float> values,
                                                  const v1::PullRequest& pull, std::span<float> out,
                                                  int64_t offset, v1::WireDType dtype, bool* pushed,
                                                  const std::function<void()>& written) {
  *pushed = false;
  if (values.empty() || out.empty()) {
    return absl::InvalidArgumentError("PushPull of an empty range");
  }
  if (stream_ == nullptr) {
    stream_ctx_ = std::make_unique<grpc::ClientContext>();
    shard_.Prepare(stream_ctx_.get());
    stream_.reset(
        grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
            shard_.channel().get(), push_pull_method_, stream_ctx_.get()));
  }
  // On failure, the stream's own status says more than a failed write or a
  // short read (the server's error, or the transport's).
  bool ended = false;  // the server ended the stream
  auto fail = [&](absl::Status local) -> absl::Status {
    const absl::Status remote = EndStream(ended ? StreamEnd::kEnded : StreamEnd::kCancel);
    if (!remote.ok() && (ended || !absl::IsCancelled(remote))) return remote;
    return local.ok()
               ? absl::UnavailableError(absl::StrCat(shard_.name(), ": PushPull stream ended"))
               : local;
  };
  // The header opens the step's push; the pull request closes it.
  if (!WritePushFrames(header, values, offset, dtype, &push_pool_, &pull,
                       [this](const grpc::ByteBuffer& f) { return stream_->Write(f); })) {
    ended = true;
    return fail(absl::OkStatus());
  }
  if (written) written();
  PullReply reply;
  bool any = false;
  absl::Status error = ReadPull(
      shard_.name(),
      [&](grpc::ByteBuffer* b) {
        ended = !stream_->Read(b);
        return !ended;
      },
      out, offset, &reply, &any);
  *pushed = any;
  if (!error.ok() || !any) return fail(error);
  return reply;
}

}  // namespace kubetrain::ps
