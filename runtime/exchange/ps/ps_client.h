// PsShardClient: one worker's connection to one parameter-server shard.
// Adds the job token to every call, chunks float ranges onto streams and
// decodes them back. Initialize, Push and Pull go through grpc::ByteBuffer
// frames (chunk_frame.h): one copy each way, fused with the CRC. Keeps no training state.
// Thread-safe (gRPC stubs are), but the exchange drives each shard from one thread at a time.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_CLIENT_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_CLIENT_H_

#include <grpcpp/impl/rpc_method.h>

#include <chrono>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "kubetrain/v1/parameter_server.grpc.pb.h"
#include "runtime/exchange/ps/chunk_frame.h"

namespace kubetrain::ps {

struct PullReply {
  int64_t global_step = 0;
  uint64_t incarnation = 0;
  bool finished = false;
};

class PsShardClient {
 public:
  PsShardClient(std::string name, std::string address, std::string token);

  const std::string& name() const { return name_; }
  const std::string& address() const { return address_; }

  // Unary calls wait for the channel to be ready up to `timeout`.
  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& req,
                                                std::chrono::milliseconds timeout);
  // Streams `values` (the shard's range, starting at `offset`) after the
  // header: Initialize when `initialize`, else Push.
  absl::StatusOr<v1::PushResponse> Send(bool initialize, const v1::PushHeader& header,
                                        std::span<const float> values, int64_t offset,
                                        v1::WireDType dtype);
  // Receives the shard's range into `out`; blocks as long as the server
  // holds the barrier.
  absl::StatusOr<PullReply> Pull(const v1::PullRequest& req, std::span<float> out, int64_t offset);
  absl::StatusOr<v1::DoneResponse> Done(int worker, std::chrono::milliseconds timeout);
  absl::StatusOr<v1::StatusResponse> GetStatus(std::chrono::milliseconds timeout);
  absl::StatusOr<v1::CheckpointResponse> Checkpoint(std::chrono::milliseconds timeout);

 private:
  void Prepare(grpc::ClientContext* ctx) const;

  std::string name_, address_, token_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
  const grpc::internal::RpcMethod initialize_method_, push_method_, pull_method_;
  FramePool push_pool_;
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_CLIENT_H_
