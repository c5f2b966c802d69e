// PsShardClient: one worker's connection to one parameter-server shard.
// Adds the job token to every call, chunks float ranges onto streams and
// decodes them back. Initialize, Push and Pull go through grpc::ByteBuffer
// frames (chunk_frame.h): one copy each way, fused with the CRC. When the
// shard advertises a data port at registration, PushPull steps (fp32 or
// fp16) go over the direct TCP data plane instead (ps_data_client.h: no
// copy at all for fp32),
// falling back to gRPC if that port cannot be reached. Keeps no training state.
// Thread-compatible: the exchange drives each shard from one thread at a time
// (PushPull keeps one stream open between calls).
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_CLIENT_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_CLIENT_H_

#include <grpcpp/impl/rpc_method.h>

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "kubetrain/v1/parameter_server.grpc.pb.h"
#include "runtime/exchange/ps/chunk_frame.h"
#include "runtime/exchange/ps/ps_data_client.h"

namespace kubetrain::ps {

class PsShardClient {
 public:
  PsShardClient(std::string name, std::string address, std::string token);
  ~PsShardClient();
  PsShardClient(const PsShardClient&) = delete;
  PsShardClient& operator=(const PsShardClient&) = delete;

  const std::string& name() const { return name_; }
  const std::string& address() const { return address_; }

  // Unary calls wait for the channel to be ready up to `timeout`. Register
  // also learns the shard's data port (RegisterResponse.data_port).
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
  // One step on the PushPull stream, opened on first use and kept open:
  // sends `values` after `header` and `pull`, then receives the range into
  // `out` once the server allows the pull. Any error closes the stream (the
  // next call opens a new one) and returns the status Send or Pull would
  // have; `*pushed` says whether the server had committed the push (it had
  // started answering). `written` (may be empty) runs once the push is
  // written. Unimplemented: the server predates PushPull (use Send and
  // Pull).
  absl::StatusOr<PullReply> PushPull(const v1::PushHeader& header, std::span<const float> values,
                                     const v1::PullRequest& pull, std::span<float> out,
                                     int64_t offset, v1::WireDType dtype, bool* pushed,
                                     const std::function<void()>& written = {});
  // Closes the PushPull stream, if open, waiting for the server's end, and
  // the data-plane connection.
  void ClosePushPull();
  // PushPull steps go over the direct TCP data plane (tests, logs).
  bool data_plane_active() const { return data_.active(); }
  // A line worth logging once (the data plane connected, or was given up).
  std::string TakeNotice() { return data_.TakeNotice(); }
  absl::StatusOr<v1::DoneResponse> Done(int worker, std::chrono::milliseconds timeout);
  absl::StatusOr<v1::StatusResponse> GetStatus(std::chrono::milliseconds timeout);
  absl::StatusOr<v1::CheckpointResponse> Checkpoint(std::chrono::milliseconds timeout);

 private:
  void Prepare(grpc::ClientContext* ctx) const;
  // Ends the open PushPull stream and returns its status: kClose after the
  // last step, kEnded when the server has ended it, kCancel to abandon it.
  enum class StreamEnd { kClose, kEnded, kCancel };
  absl::Status EndPushPull(StreamEnd how);
  // For a data-plane step's waits: fails once the shard answers GetStatus
  // with an incarnation other than `incarnation` (it restarted).
  exchange::IoCheck StillTheSameShard(uint64_t incarnation);
  // Reads a pull's frames from `next` into `out`; DataLoss on a bad frame
  // (after draining nothing: the caller ends the call).
  template <typename Next>
  absl::Status ReadPull(Next next, std::span<float> out, int64_t offset, PullReply* reply,
                        bool* any);

  std::string name_, address_, token_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
  const grpc::internal::RpcMethod initialize_method_, push_method_, pull_method_, push_pull_method_;
  FramePool push_pool_;
  PsDataClient data_;
  bool data_fp16_ = false;      // the shard's data plane takes fp16 steps
  bool data_pipeline_ = false;  // ... and pipelined steps
  // The open PushPull stream, if any.
  std::unique_ptr<grpc::ClientContext> stream_ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream_;
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_CLIENT_H_
