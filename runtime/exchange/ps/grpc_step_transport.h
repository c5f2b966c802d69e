// GrpcStepTransport: a worker's steps to one parameter-server shard on the
// shard's gRPC PushPull stream (frames in grpc_frame.h), opened on first
// use and kept open for the whole job: per step a push (its last message
// carries the pull request) and the pull the shard answers once its rule
// allows it, so a step costs one round trip and no call set-up. Each frame
// is copied once each way between the caller's buffers and gRPC's slices,
// the CRC-32C fused with the copy. Every shard serves it: the transport the
// exchange falls back on.
//
// Thread-compatible: one step at a time.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_GRPC_STEP_TRANSPORT_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_GRPC_STEP_TRANSPORT_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/rpc_method.h>

#include <memory>
#include <string>

#include "runtime/exchange/ps/grpc_frame.h"
#include "runtime/exchange/ps/shard_client.h"
#include "runtime/exchange/ps/step_transport.h"

namespace kubetrain::ps {

class GrpcStepTransport final : public StepTransport {
 public:
  // Calls on `shard`'s channel with its token; `shard` is borrowed and
  // outlives this.
  explicit GrpcStepTransport(ShardClient& shard);
  // Cancels an open stream: a destructor must not wait on a shard that may
  // be gone.
  ~GrpcStepTransport() override;
  GrpcStepTransport(const GrpcStepTransport&) = delete;
  GrpcStepTransport& operator=(const GrpcStepTransport&) = delete;

  StepTransportKind kind() const override { return StepTransportKind::kGrpcStream; }
  void Offer(const v1::RegisterResponse&) override {}
  bool CanCarry(v1::WireDType) const override { return true; }
  std::string Describe() const override { return "gRPC"; }
  // The shard's status for the step (its refusal included) when the shard
  // ended the stream; Unavailable when the stream broke; DataLoss for a
  // corrupt pull.
  absl::StatusOr<PullReply> Step(const v1::PushHeader& header, std::span<const float> values,
                                 const v1::PullRequest& pull, std::span<float> out, int64_t offset,
                                 v1::WireDType dtype, bool* pushed,
                                 const std::function<void()>& written) override;
  // Closes the stream, if open, waiting for the shard's end.
  void Close() override;

 private:
  // Ends the open stream and returns its status: kClose after the last
  // step, kEnded when the server has ended it, kCancel to abandon it.
  enum class StreamEnd { kClose, kEnded, kCancel };
  absl::Status EndStream(StreamEnd how);

  ShardClient& shard_;
  const grpc::internal::RpcMethod push_pull_method_;
  FramePool push_pool_;
  // The open stream, if any.
  std::unique_ptr<grpc::ClientContext> stream_ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream_;
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_GRPC_STEP_TRANSPORT_H_
