// PsDataServer: the direct TCP data plane of one parameter-server shard
// (data_plane_wire.h). It listens on an ephemeral port beside the gRPC
// service, which advertises the port in RegisterResponse.data_port, and runs
// each worker's steps on that worker's connection, one thread per
// connection:
//  - the hello carries the worker id, the incarnation it registered with and
//    the job token: a wrong token is refused and counted as a bad_token
//    rejection, as on gRPC; an old incarnation is told to re-register;
//  - a step's gradient is received straight into the worker's staging slot
//    (PsShard::BeginStaging), its CRC-32C and NaN/Inf count computed piece by
//    piece as the pieces arrive, and committed only once the trailer's
//    checksum matches and the whole range arrived: a corrupt, short or
//    wrong-sized push commits nothing, is counted and answered with an error;
//  - the pull then waits as the mode says (PsShard::Read) and sends the
//    parameters from a snapshot taken once per version of them (every worker
//    of a sync step gets the same one), checksummed as it is copied;
//  - a pipelined step (a pipelining shard, sync mode) hands each chunk to
//    the shard once it passed its checksum and NaN/Inf count
//    (PsShard::PushChunk), while a second thread sends the round's chunks
//    back as the shard applies them (PsShard::WaitRound), and a restart
//    frame when the round was rolled back.
// Errors end the connection after their answer; a worker that went away
// while its pull waited is noticed (PeerHungUp) and its wait abandoned.
// At most MaxConnections() connections are served at once (each holds a
// thread; one that sends no hello is dropped after 10 s): beyond that a
// connection is answered ResourceExhausted and closed, so strangers cannot
// pile up threads.
//
// Thread-safe. Stop() (and the destructor) closes the listener, wakes every
// connection and joins the threads.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_DATA_SERVER_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_DATA_SERVER_H_

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/exchange/ps/data_plane_wire.h"
#include "runtime/exchange/ps/ps_shard.h"
#include "runtime/exchange/ps/reuse_pool.h"
#include "runtime/exchange/tcp_link.h"
#include "runtime/metrics/runtime_metrics.h"

namespace kubetrain::ps {

class PsDataServer {
 public:
  // Listens on `host` ("0.0.0.0", "127.0.0.1", "::"), an ephemeral port.
  // `token` empty: no authentication. `metrics` (borrowed, may be null)
  // counts the tensor bytes moved, as PsService does.
  static absl::StatusOr<std::unique_ptr<PsDataServer>> Start(
      PsShard& shard, const std::string& host, std::string token,
      metrics::RuntimeMetrics* metrics = nullptr);
  ~PsDataServer();
  PsDataServer(const PsDataServer&) = delete;
  PsDataServer& operator=(const PsDataServer&) = delete;

  int port() const { return port_; }
  // 4 per training replica (a worker reconnecting while its old connection
  // winds down), plus 16.
  int MaxConnections() const;
  // Connections open now (tests).
  int connections() const;
  // Pipelined steps served to the end (tests).
  int64_t pipelined_steps() const { return pipelined_steps_; }
  void Stop();

 private:
  // The parameters a pull answers with: pinned in the shard (it copies on
  // its next update while this is held), so they are sent with no copy.
  struct Pinned {
    PullResult result;  // its pin holds the buffer
    std::span<const float> values;
  };
  struct Connection {
    exchange::TcpConnection conn;
    std::thread thread;
    std::atomic<bool> done{false};
  };

  PsDataServer(PsShard& shard, exchange::TcpListener listener, std::string token,
               metrics::RuntimeMetrics* metrics);
  void AcceptLoop();
  void Serve(Connection& c);
  // A connection's buffers: a duplicate push's floats land in `floats`;
  // fp16 values, either way, pass through `half` one piece at a time.
  struct Scratch {
    std::vector<float> floats;
    std::vector<uint16_t> half;
  };
  // One step on an open connection; false ends the connection.
  bool Step(exchange::TcpConnection& conn, int worker, Scratch& scratch);
  // A pipelined step (the header said so, the shard pipelines): the push is
  // received chunk by chunk on this thread while a second thread streams
  // the round's chunks back (StreamRound); then the end frame and answer.
  bool PipelinedStep(exchange::TcpConnection& conn, int worker, const data_plane::StepHeader& head,
                     Scratch& scratch);
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
  absl::Status SendParams(exchange::TcpConnection& conn, const data_plane::AnswerBytes& answer,
                          const Pinned& p, data_plane::DType dtype, const exchange::IoCheck& check);
  void ReapFinished();  // requires mu_

  PsShard& shard_;
  exchange::TcpListener listener_;
  const int port_;
  const std::string token_;
  metrics::RuntimeMetrics* const metrics_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> pipelined_steps_{0};
  std::thread accept_thread_;

  mutable std::mutex mu_;
  std::list<std::unique_ptr<Connection>> connections_;

  struct HalfParams {
    uint64_t version = 0;
    std::vector<uint16_t> values;
    uint32_t crc = 0;
  };
  std::mutex crc_mu_;         // guards the four below
  uint64_t crc_version_ = 0;  // 0: none known yet (versions start at 1)
  uint32_t crc_ = 0;
  std::shared_ptr<HalfParams> half_;  // the newest; senders hold it as const
  ReusePool<HalfParams> half_pool_;
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_DATA_SERVER_H_
