// GrpcShardServer: the gRPC face of one shard: framing only. It reads the job
// token from the call's metadata and each frame (grpc_frame.h), hands the
// step to the ShardSession (shard_session.h: every check, the staging, the
// commit and the read), decodes gradient chunks from the received slices
// straight where the session places them (one copy, with the CRC and the
// NaN/Inf count in the same pass), and streams parameters back in chunks.
//
// The service is kubetrain.v1.ParameterServer (parameter_server.proto),
// registered by hand: Initialize, Push and Pull carry grpc::ByteBuffer
// frames (grpc_frame.h), which are byte-for-byte the protobuf encoding of
// PushMessage/PullMessage, so clients built on the generated stubs work
// unchanged; the other methods use the generated messages.
//
// PushPull runs a worker's steps on one stream (a push, then the pull it
// allows, per step), so a step costs one round trip and no call set-up.
//
// Pull frames are encoded once per version of the parameters and kept: every
// worker pulling that version (all of them, in sync mode) is sent the same
// slices.
// Thread-safe: gRPC calls it from many threads.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_GRPC_SHARD_SERVER_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_GRPC_SHARD_SERVER_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/service_type.h>
#include <grpcpp/support/sync_stream.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "kubetrain/v1/parameter_server.pb.h"
#include "runtime/exchange/grpc_util.h"
#include "runtime/exchange/ps/grpc_frame.h"
#include "runtime/exchange/ps/grpc_methods.h"
#include "runtime/exchange/ps/shard_session.h"

namespace kubetrain::ps {

class GrpcShardServer final : public grpc::Service {
 public:
  // `session` (borrowed) checks the job token, serves the steps and counts
  // the bytes moved.
  explicit GrpcShardServer(ShardSession& session);

  // The port of this shard's direct TCP data plane (TcpShardServer), told to
  // workers at registration; 0 (the default) advertises none. May change
  // while serving (tests point workers at another data plane).
  void set_data_port(int port) { data_port_ = port; }
  // Whether to tell workers the data plane takes fp16 steps (true: every
  // TcpShardServer does). False only acts as a shard from before that did.
  void set_data_plane_fp16(bool yes) { data_plane_fp16_ = yes; }

  grpc::Status Register(grpc::ServerContext* ctx, const v1::RegisterRequest* req,
                        v1::RegisterResponse* resp);
  grpc::Status Initialize(grpc::ServerContext* ctx, grpc::ServerReader<grpc::ByteBuffer>* reader,
                          v1::PushResponse* resp);
  grpc::Status Push(grpc::ServerContext* ctx, grpc::ServerReader<grpc::ByteBuffer>* reader,
                    v1::PushResponse* resp);
  grpc::Status Pull(grpc::ServerContext* ctx, const v1::PullRequest* req,
                    grpc::ServerWriter<grpc::ByteBuffer>* writer);
  // Push then Pull, step after step, on one stream (parameter_server.proto).
  grpc::Status PushPull(grpc::ServerContext* ctx,
                        grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream);
  grpc::Status Done(grpc::ServerContext* ctx, const v1::DoneRequest* req, v1::DoneResponse* resp);
  grpc::Status Checkpoint(grpc::ServerContext* ctx, const v1::CheckpointRequest* req,
                          v1::CheckpointResponse* resp);
  grpc::Status GetStatus(grpc::ServerContext* ctx, const v1::StatusRequest* req,
                         v1::StatusResponse* resp);

 private:
  // The encoded frames of one version of the parameters.
  struct PullFrames {
    uint64_t version = 0;
    v1::WireDType dtype = v1::WIRE_DTYPE_F32;
    bool finished = false;
    std::vector<grpc::ByteBuffer> frames;
    int64_t bytes = 0;  // tensor bytes in the frames
  };

  // The job-token checks (ShardSession::AdmitWriter, AdmitReader) of the
  // token in the call's metadata.
  grpc::Status AdmitWriter(const grpc::ServerContext& ctx, const char* call);
  grpc::Status AdmitReader(const grpc::ServerContext& ctx);
  grpc::Status ReceiveInto(grpc::ServerContext* ctx, grpc::ServerReader<grpc::ByteBuffer>* reader,
                           bool initialize, v1::PushResponse* resp);
  // One push: `first` (its header frame), then chunks from `read`, each
  // placed by the session and decoded into the worker's slot (size and CRC
  // checked in the copy). `pull` null: the push is the whole stream (Push,
  // Initialize). Otherwise (PushPull) the push ends with the message that
  // carries the pull request, stored in `*pull`; a duplicate push's chunks
  // are read and dropped up to there.
  grpc::Status ReceivePush(absl::StatusOr<ReceivedFrame> first,
                           const std::function<bool(grpc::ByteBuffer*)>& read, bool initialize,
                           std::optional<v1::PullRequest>* pull, v1::PushResponse* resp);
  // Waits as the pull request's mode says, then the encoded frames of the
  // parameters it may read.
  grpc::Status ReadFrames(grpc::ServerContext* ctx, const v1::PullRequest& req,
                          std::shared_ptr<const PullFrames>* out) ABSL_LOCKS_EXCLUDED(pull_mu_);

  ShardSession& session_;
  std::atomic<int> data_port_{0};
  bool data_plane_fp16_ = true;
  // The frames of the newest version pulled: framing (protobuf messages,
  // each chunk with its CRC), so this transport's own.
  absl::Mutex pull_mu_;  // taken inside the shard's lock (PsShard::Read's callback)
  std::shared_ptr<const PullFrames> pull_frames_ ABSL_GUARDED_BY(pull_mu_);
  FramePool pull_pool_;  // thread-safe
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_GRPC_SHARD_SERVER_H_
