// RendezvousServer: rank 0's gRPC service that forms the allreduce world
// (see proto/kubetrain/v1/collective.proto). It answers Join once every
// rank has joined, or with DEADLINE_EXCEEDED naming the missing ranks after
// the join timeout; then it keeps every rank's heartbeat and collective
// progress, and the first abort reason any rank reports (or that it finds:
// a rank silent for the peer timeout, a rank that restarted), which every
// heartbeat answer carries so all ranks exit naming the same lost peer.
// Thread-safe. Stops its gRPC server in the destructor.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_RENDEZVOUS_SERVER_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_RENDEZVOUS_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "api/ports.h"
#include "base/clock.h"
#include "kubetrain/v1/collective.grpc.pb.h"

namespace kubetrain::allreduce {

struct RendezvousServerOptions {
  std::string listen_address = api::kDefaultListenAddress;
  std::vector<std::string> names;  // replica name of each rank; size = world
  std::string token;               // api::kEnvJobToken; empty: no check
  uint64_t generation = 1;         // rank 0's incarnation
  std::string nccl_unique_id;      // handed to every rank (may be empty)
  double join_timeout_seconds = 300;
  double peer_timeout_seconds = 120;
};

class RendezvousService final : public v1::Rendezvous::Service {
 public:
  RendezvousService(RendezvousServerOptions options, const Clock& clock);

  grpc::Status Join(grpc::ServerContext* ctx, const v1::JoinRequest* req,
                    v1::JoinResponse* resp) override ABSL_LOCKS_EXCLUDED(mu_);
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                         v1::HeartbeatResponse* resp) override ABSL_LOCKS_EXCLUDED(mu_);
  grpc::Status Abort(grpc::ServerContext* ctx, const v1::AbortRequest* req,
                     v1::AbortResponse* resp) override ABSL_LOCKS_EXCLUDED(mu_);

  // Wakes Join calls still waiting (server shutdown).
  void Close() ABSL_LOCKS_EXCLUDED(mu_);
  // After an abort: waits until every rank still alive has confirmed, in a
  // heartbeat, that it holds the reason (at most `seconds`), so that rank 0
  // leaving does not make the others blame rank 0.
  void WaitUntilAbortIsKnown(double seconds) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct RankState {
    bool joined = false;
    v1::RankInfo info;
    double last_seen = 0;
    int64_t started = 0, finished = 0;
    bool knows_abort = false;
  };
  void FillWorld(v1::JoinResponse* resp) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecordAbort(int lost_rank, const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckSilentRanks(double now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string MissingRanks() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every rank but rank 0 (the caller) and the lost one has confirmed the
  // abort reason.
  bool AllKnowAbortLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Set at construction, read without the lock.
  const RendezvousServerOptions options_;
  const Clock& clock_;
  // The world size is options_.names.size(): ranks_ has that many entries.
  absl::Mutex mu_;
  absl::CondVar cv_;  // with mu_: the world formed, closed_, an abort confirmed
  std::vector<RankState> ranks_ ABSL_GUARDED_BY(mu_);
  bool formed_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  double first_join_ ABSL_GUARDED_BY(mu_) = -1;
  std::string abort_reason_ ABSL_GUARDED_BY(mu_);
  int lost_rank_ ABSL_GUARDED_BY(mu_) = -1;
};

class RendezvousServer {
 public:
  // Listens on options.listen_address (port 0: any; port() says which).
  static absl::StatusOr<std::unique_ptr<RendezvousServer>> Start(RendezvousServerOptions options,
                                                                 const Clock& clock);
  ~RendezvousServer();
  int port() const { return port_; }
  void WaitUntilAbortIsKnown(double seconds) { service_->WaitUntilAbortIsKnown(seconds); }

 private:
  RendezvousServer() = default;
  std::unique_ptr<RendezvousService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace kubetrain::allreduce

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_RENDEZVOUS_SERVER_H_
