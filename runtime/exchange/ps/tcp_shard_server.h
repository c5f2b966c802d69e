// TcpShardServer: the direct TCP data plane of one parameter-server shard
// (tcp_wire_format.h): framing only, each step served by the ShardSession
// (shard_session.h) that checks, stages, commits and reads. It listens on
// an ephemeral port beside the gRPC service, which advertises the port in
// RegisterResponse.data_port, and runs each worker's steps on that worker's
// connection, one thread per connection:
//  - the hello carries the worker id, the incarnation it registered with and
//    the job token, which the session admits (ShardSession::AdmitConnection);
//  - a step's gradient is received straight where the session places it
//    (the worker's staging slot), its CRC-32C and NaN/Inf count computed
//    piece by piece as the pieces arrive, and committed by the session once
//    the trailer's checksum matches and the whole range arrived: a corrupt,
//    short or wrong-sized push commits nothing, is counted and answered with
//    an error;
//  - the pull then waits as the mode says and is sent from the parameters
//    pinned (ShardSession::ReadPinned: no copy while no update runs), the
//    checksum computed once per version as the first sender sends them;
//  - a pipelined step (a pipelining shard, sync mode) hands each chunk to
//    the session once it passed its checksum and NaN/Inf count, while a
//    second thread sends the round's chunks back as the shard applies them
//    (ShardSession::WaitRound), and a restart frame when the round was
//    rolled back.
// Errors end the connection after their answer; a worker that went away
// while its pull waited is noticed (PeerHungUp) and its wait abandoned.
// At most MaxConnections() connections are served at once (each holds a
// thread; one that sends no hello is dropped after 10 s): beyond that a
// connection is answered ResourceExhausted and closed, so strangers cannot
// pile up threads.
//
// Thread-safe. Stop() (and the destructor) closes the listener, wakes every
// connection and joins the threads.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_TCP_SHARD_SERVER_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_TCP_SHARD_SERVER_H_

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/exchange/ps/reuse_pool.h"
#include "runtime/exchange/ps/shard_session.h"
#include "runtime/exchange/ps/tcp_wire_format.h"
#include "runtime/exchange/tcp_link.h"

namespace kubetrain::ps {

class TcpShardServer {
 public:
  // Listens on `host` ("0.0.0.0", "127.0.0.1", "::"), an ephemeral port.
  // `session` (borrowed) checks the job token, serves the steps and counts
  // the bytes moved, as for GrpcShardServer.
  static absl::StatusOr<std::unique_ptr<TcpShardServer>> Start(ShardSession& session,
                                                               const std::string& host);
  ~TcpShardServer();
  TcpShardServer(const TcpShardServer&) = delete;
  TcpShardServer& operator=(const TcpShardServer&) = delete;

  int port() const { return port_; }
  // 4 per training replica (a worker reconnecting while its old connection
  // winds down), plus 16.
  int MaxConnections() const;
  // Connections open now (tests).
  int connections() const ABSL_LOCKS_EXCLUDED(mu_);
  // Pipelined steps served to the end (tests).
  int64_t pipelined_steps() const { return pipelined_steps_; }
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Connection {
    exchange::TcpConnection conn;
    std::thread thread;
    std::atomic<bool> done{false};
  };

  TcpShardServer(ShardSession& session, exchange::TcpListener listener);
  void AcceptLoop() ABSL_LOCKS_EXCLUDED(mu_);
  void Serve(Connection& c);
  // A connection's buffers: a duplicate push's floats land in `floats`;
  // fp16 values, either way, pass through `half` one piece at a time.
  struct Scratch {
    std::vector<float> floats;
    std::vector<uint16_t> half;
  };
  // One step on an open connection; false ends the connection.
  bool Step(exchange::TcpConnection& conn, int worker, Scratch& scratch);
  // Receives `n` values of `dtype` into `to` (fp16: through scratch.half),
  // extending `*crc` over the bytes received; adds their NaN/Inf count to
  // `*nonfinite` unless `drop` (a duplicate's values, not looked at).
  absl::Status ReceiveValues(exchange::TcpConnection& conn, float* to, size_t n,
                             data_plane::DType dtype, bool drop, Scratch& scratch,
                             const exchange::IoCheck& check, uint32_t* crc, int64_t* nonfinite);
  // A pipelined step (the header said so, the session took it): the push is
  // received chunk by chunk on this thread while a second thread streams
  // the round's chunks back (StreamRound); then the end frame and answer.
  bool PipelinedStep(exchange::TcpConnection& conn, int worker, const data_plane::StepHeader& head,
                     StagedPush& push, Scratch& scratch);
  // Sends the round's chunks as the shard applies them, until it commits
  // and every chunk is sent; `stop` says the push failed. `last` gets the
  // committed round; `broken` is set when a send failed (the connection is
  // unusable), as opposed to the shard's error or a stop.
  absl::Status StreamRound(exchange::TcpConnection& conn, int worker,
                           const data_plane::StepHeader& head, const std::atomic<bool>& stop,
                           RoundRead* last, bool* broken);
  // Sends `p`'s parameters and their CRC-32C trailer after `answer`. The
  // checksum of a version is computed once, piece by piece while each piece
  // is in cache for the kernel's copy; a sender that finds it known for
  // that version sends it without reading the bytes.
  // fp16: the parameters narrowed once per version (half_), sent whole.
  // The per-version encodings (the fp32 checksum, the fp16 copy) are this
  // wire's framing, so they are kept here.
  absl::Status SendParams(exchange::TcpConnection& conn, const data_plane::AnswerBytes& answer,
                          const PinnedParams& p, data_plane::DType dtype,
                          const exchange::IoCheck& check) ABSL_LOCKS_EXCLUDED(crc_mu_);
  void ReapFinished() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ShardSession& session_;
  exchange::TcpListener listener_;
  const int port_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> pipelined_steps_{0};
  std::thread accept_thread_;

  mutable absl::Mutex mu_;
  std::list<std::unique_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);

  struct HalfParams {
    uint64_t version = 0;
    std::vector<uint16_t> values;
    uint32_t crc = 0;
  };
  absl::Mutex crc_mu_;
  uint64_t crc_version_ ABSL_GUARDED_BY(crc_mu_) = 0;  // 0: none known yet (versions start at 1)
  uint32_t crc_ ABSL_GUARDED_BY(crc_mu_) = 0;
  // The newest; senders hold it as const.
  std::shared_ptr<HalfParams> half_ ABSL_GUARDED_BY(crc_mu_);
  ReusePool<HalfParams> half_pool_ ABSL_GUARDED_BY(crc_mu_);
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_TCP_SHARD_SERVER_H_
