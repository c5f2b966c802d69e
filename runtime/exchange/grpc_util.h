// gRPC plumbing shared by the runtime's services (parameter server,
// rendezvous): the job-token metadata, Status conversion and the channel
// settings every runtime client uses. Functions are thread-safe.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_GRPC_UTIL_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_GRPC_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/status.h"

namespace kubetrain::exchange {

// gRPC metadata key carrying api::kEnvJobToken.
inline constexpr char kTokenMetadataKey[] = "x-kubetrain-token";

// UNAUTHENTICATED unless the call carries `token` (empty: no check).
grpc::Status CheckToken(const grpc::ServerContext& ctx, const std::string& token);
// Adds `token` (when non-empty) to an outgoing call.
void AddToken(grpc::ClientContext* ctx, const std::string& token);

// Same code and message in the other library's type, and the same payloads:
// ToGrpc packs each absl::Status payload as an Any (type_url: the payload's
// type URL) into a kubetrain.v1.StatusDetails in the status details;
// FromGrpc sets each such Any back as a payload. Details that do not parse
// as StatusDetails (another kind of server's) are dropped.
grpc::Status ToGrpc(const absl::Status& s);
absl::Status FromGrpc(const grpc::Status& s);

// Channel settings shared by every runtime client: fast reconnects (a
// restarted peer is found within ~1 s), keepalive to notice dead peers.
std::shared_ptr<grpc::Channel> MakeRuntimeChannel(const std::string& address);

// HTTP/2 and TCP settings for bulk tensor streams, on both ends: frames big
// enough for a whole 1 MiB chunk message (instead of 16 KiB), an 8 MiB
// flow-control window from the start, and 1 MiB socket reads, so a chunk
// costs a few syscalls and wake-ups rather than dozens.
void SetBulkTransferArgs(grpc::ChannelArguments& args);
void SetBulkTransferArgs(grpc::ServerBuilder& builder);

}  // namespace kubetrain::exchange

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_GRPC_UTIL_H_
