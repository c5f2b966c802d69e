// ShardClient: one worker's (or evaluator's) gRPC client of one
// parameter-server shard, for everything but the steps: registration,
// initialisation, the observer's pull, Done, GetStatus and Checkpoint. Adds
// the job token to every call. Initialize and Pull carry tensors as
// hand-encoded frames (grpc_frame.h): one copy each way, fused with the
// CRC. A worker's steps go through a StepTransport (step_transport.h),
// which borrows this client's channel and its GetStatus. Keeps no training
// state. Thread-safe: each call has its own context.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_SHARD_CLIENT_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_SHARD_CLIENT_H_

#include <grpcpp/impl/rpc_method.h>

#include <chrono>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "kubetrain/v1/parameter_server.grpc.pb.h"
#include "runtime/exchange/ps/grpc_frame.h"
#include "runtime/exchange/ps/step_transport.h"

namespace kubetrain::ps {

class ShardClient {
 public:
  // `name` for messages ("ps-0"); `address` is the shard's "host:port".
  ShardClient(std::string name, std::string address, std::string token);
  ShardClient(const ShardClient&) = delete;
  ShardClient& operator=(const ShardClient&) = delete;

  const std::string& name() const { return name_; }
  const std::string& address() const { return address_; }
  const std::string& token() const { return token_; }
  // For the gRPC step transport's stream: the channel, and the token on a
  // call's context.
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  void Prepare(grpc::ClientContext* ctx) const;

  // Waits for the channel to be ready up to `timeout`. The response says
  // what the shard offers the step transports (StepTransport::Offer).
  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& req,
                                                std::chrono::milliseconds timeout);
  // Streams `values` (the shard's range, starting at `offset`) after the
  // header: the shard's first parameters.
  absl::StatusOr<v1::PushResponse> Initialize(const v1::PushHeader& header,
                                              std::span<const float> values, int64_t offset,
                                              v1::WireDType dtype);
  // Receives the shard's range into `out` without pushing (a worker's first
  // parameters, a retry after its push was committed; the evaluator's
  // reads); blocks as long as the shard holds the pull back.
  absl::StatusOr<PullReply> Pull(const v1::PullRequest& req, std::span<float> out, int64_t offset);
  absl::StatusOr<v1::DoneResponse> Done(int worker, std::chrono::milliseconds timeout);
  // The worker leaves the running job (DoneRequest.leaving): the shard's
  // rounds stop waiting for it; `reason` goes to the shard's log.
  absl::StatusOr<v1::DoneResponse> Leave(int worker, const std::string& reason,
                                         std::chrono::milliseconds timeout);
  // Waits for the channel to be ready up to `timeout`.
  absl::StatusOr<v1::StatusResponse> GetStatus(std::chrono::milliseconds timeout);
  absl::StatusOr<v1::CheckpointResponse> Checkpoint(std::chrono::milliseconds timeout);

 private:
  const std::string name_, address_, token_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<v1::ParameterServer::Stub> stub_;
  const grpc::internal::RpcMethod initialize_method_, pull_method_;
  FramePool push_pool_;  // thread-safe
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_SHARD_CLIENT_H_
