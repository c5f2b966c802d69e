#include "runtime/exchange/grpc_util.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "kubetrain/v1/status.pb.h"
#include "runtime/exchange/job_token.h"

namespace kubetrain::exchange {

grpc::Status CheckToken(const grpc::ServerContext& ctx, const std::string& token) {
  if (token.empty()) return grpc::Status::OK;
  const auto& md = ctx.client_metadata();
  auto it = md.find(kTokenMetadataKey);
  if (it == md.end() ||
      !JobTokenAccepted(token, absl::string_view(it->second.data(), it->second.size()))) {
    return ToGrpc(WrongJobTokenError());
  }
  return grpc::Status::OK;
}

void AddToken(grpc::ClientContext* ctx, const std::string& token) {
  if (!token.empty()) ctx->AddMetadata(kTokenMetadataKey, token);
}

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  v1::StatusDetails details;
  s.ForEachPayload([&](absl::string_view type_url, const absl::Cord& value) {
    google::protobuf::Any* any = details.add_details();
    any->set_type_url(std::string(type_url));
    any->set_value(std::string(value));
  });
  if (details.details().empty()) {
    return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
  }
  details.set_code(static_cast<int32_t>(s.code()));
  details.set_message(std::string(s.message()));
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()),
                      details.SerializeAsString());
}

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  v1::StatusDetails details;
  if (!s.error_details().empty() && details.ParseFromString(s.error_details())) {
    for (const google::protobuf::Any& any : details.details()) {
      if (!any.type_url().empty()) out.SetPayload(any.type_url(), absl::Cord(any.value()));
    }
  }
  return out;
}

std::shared_ptr<grpc::Channel> MakeRuntimeChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // A replaced peer (a recreated pod behind the same Service name) has a new
  // address: look the name up again after a second, not gRPC's default 30 s
  // (measured: the survivors of a lost worker 0 waited 29 s for it).
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 1000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Each client gets its own TCP connection rather than sharing a subchannel.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  SetBulkTransferArgs(args);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

namespace {
constexpr int kMaxFrameBytes = 2 << 20;
constexpr int kLookaheadBytes = 8 << 20;
constexpr int kReadChunkBytes = 1 << 20;
}  // namespace

void SetBulkTransferArgs(grpc::ChannelArguments& args) {
  args.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, kMaxFrameBytes);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kLookaheadBytes);
  args.SetInt(GRPC_ARG_TCP_READ_CHUNK_SIZE, kReadChunkBytes);
}

void SetBulkTransferArgs(grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, kMaxFrameBytes);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kLookaheadBytes);
  builder.AddChannelArgument(GRPC_ARG_TCP_READ_CHUNK_SIZE, kReadChunkBytes);
}

}  // namespace kubetrain::exchange
