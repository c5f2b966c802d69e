#include "runtime/exchange/grpc_util.h"

#include "absl/strings/str_cat.h"
#include "api/env_vars.h"

namespace kubetrain::exchange {

grpc::Status CheckToken(const grpc::ServerContext& ctx, const std::string& token) {
  if (token.empty()) return grpc::Status::OK;
  const auto& md = ctx.client_metadata();
  auto it = md.find(kTokenMetadataKey);
  if (it == md.end() || std::string(it->second.data(), it->second.size()) != token) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrCat("missing or wrong job token (", api::kEnvJobToken, ")"));
  }
  return grpc::Status::OK;
}

void AddToken(grpc::ClientContext* ctx, const std::string& token) {
  if (!token.empty()) ctx->AddMetadata(kTokenMetadataKey, token);
}

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

std::shared_ptr<grpc::Channel> MakeRuntimeChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
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
