// RendezvousServer: rank 0's gRPC service that forms the allreduce world
// (see proto/kubetrain/v1/collective.proto), generation after generation.
// A generation forms once every rank it waits for has joined (a fixed
// world: the job's N workers; an elastic one: the survivors of the last
// generation and whoever joined, at least min_world, at most max_world), or
// Join answers DEADLINE_EXCEEDED naming the missing ranks after the join
// timeout. Then it keeps every rank's heartbeat and collective progress.
// What ends a generation (a rank reported lost, silent for the peer timeout,
// restarted, leaving, or a new replica joining) is one reason that every
// heartbeat answer carries, so every rank names the same cause. Without
// `reform` that reason ends the job (the ranks exit); with it the ranks
// join again and the next generation forms, the member with the newest
// state named as the one every rank takes it from.
// Thread-safe. Stops its gRPC server in the destructor.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_RENDEZVOUS_SERVER_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_RENDEZVOUS_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
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
  // The job's workers when it started (the cluster spec): the first
  // generation waits for all of them, a fixed world for all of them always.
  std::vector<std::string> names;
  std::string token;           // api::kEnvJobToken; empty: no check
  uint64_t generation = 1;     // the first generation's id (the host's incarnation); then +1 each
  std::string nccl_unique_id;  // the first generation's, handed to every rank (may be empty)
  // A fresh NCCL id for each later generation (a communicator is not
  // reused); null or "" where NCCL will not run.
  std::function<std::string()> new_nccl_unique_id;
  double join_timeout_seconds = 300;
  double peer_timeout_seconds = 120;
  // Re-form after a loss instead of ending the job.
  bool reform = false;
  // Elastic worlds (reform only): 0 < min_world <= max_world. A rank's index
  // may then be up to max_world - 1, and a generation forms without the
  // ranks that did not come back within the peer timeout.
  int min_world = 0;
  int max_world = 0;
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

  // The latest generation that formed (0: none yet) and whether it runs
  // (false while the next one forms). For tests and logs.
  uint64_t generation_number() const ABSL_LOCKS_EXCLUDED(mu_);
  // Wakes Join calls still waiting (server shutdown).
  void Close() ABSL_LOCKS_EXCLUDED(mu_);
  // After an abort: waits until every rank still alive has confirmed, in a
  // heartbeat, that it holds the reason (at most `seconds`), so that rank 0
  // leaving does not make the others blame rank 0.
  void WaitUntilAbortIsKnown(double seconds) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Member {
    v1::RankInfo info;  // index, name, addresses, incarnation, state_step; rank once formed
    uint64_t last_generation = 0;
    double last_seen = 0;
    int64_t started = 0, finished = 0;
    bool knows_abort = false;
  };
  bool elastic() const { return options_.reform && options_.max_world > 0; }
  // Replica indexes a Join may carry.
  int MaxIndex() const;
  std::string NameOf(int index) const;
  uint64_t IdOf(uint64_t number) const { return options_.generation + number - 1; }
  // The rank of replica `index` in the current generation, or -1.
  int RankOfIndex(int index) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FillWorld(v1::JoinResponse* resp) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Without reform: the job-wide reason to stop.
  void RecordAbort(int lost_rank, const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // With reform: the running generation is over (`lost_rank` lost, or left
  // on purpose when `leaving`); the next one waits for every index (a fixed
  // world) or for the members but that one (elastic).
  void EndGeneration(int lost_rank, const std::string& reason, bool leaving)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Lost(int rank, const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forms the next generation from pending_ when it has whom it waits for.
  void TryForm(double now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckSilentRanks(double now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The running generation holds replica `index` as the process
  // `incarnation`.
  bool InWorldLocked(int index, uint64_t incarnation) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A later join of replica `index` took the place of `incarnation`'s.
  bool ReplacedLocked(int index, uint64_t incarnation) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string MissingRanks() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every rank but rank 0 (the caller) and the lost one has confirmed the
  // abort reason.
  bool AllKnowAbortLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Set at construction, read without the lock.
  const RendezvousServerOptions options_;
  const Clock& clock_;
  mutable absl::Mutex mu_;
  absl::CondVar cv_;  // with mu_: a generation formed or ended, closed_, an abort confirmed
  // The latest generation, in rank order (members sorted by index).
  std::vector<Member> world_ ABSL_GUARDED_BY(mu_);
  uint64_t number_ ABSL_GUARDED_BY(mu_) = 0;  // its number; 0: none formed yet
  bool formed_ ABSL_GUARDED_BY(mu_) = false;  // world_ runs (not forming the next)
  int state_rank_ ABSL_GUARDED_BY(mu_) = 0;
  std::string nccl_id_ ABSL_GUARDED_BY(mu_);
  std::string change_ ABSL_GUARDED_BY(mu_);  // what ended the generation before world_
  // Members that left or were lost since world_ formed (counted as its
  // generations end), and world_'s counts against the generation before it.
  int left_since_ ABSL_GUARDED_BY(mu_) = 0;
  int lost_since_ ABSL_GUARDED_BY(mu_) = 0;
  int joined_ ABSL_GUARDED_BY(mu_) = 0, left_ ABSL_GUARDED_BY(mu_) = 0,
              lost_ ABSL_GUARDED_BY(mu_) = 0;
  // Forming: who joined for the next generation (by index), and the indexes
  // it waits for besides them.
  std::map<int, Member> pending_ ABSL_GUARDED_BY(mu_);
  std::set<int> expected_ ABSL_GUARDED_BY(mu_);
  double forming_since_ ABSL_GUARDED_BY(mu_) = -1;  // first join, or the generation's end
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::string abort_reason_ ABSL_GUARDED_BY(mu_);  // why world_ ended (or the job, without reform)
  int lost_rank_ ABSL_GUARDED_BY(mu_) = -1;
};

class RendezvousServer {
 public:
  // Listens on options.listen_address (port 0: any; port() says which).
  static absl::StatusOr<std::unique_ptr<RendezvousServer>> Start(RendezvousServerOptions options,
                                                                 const Clock& clock);
  ~RendezvousServer();
  int port() const { return port_; }
  uint64_t generation_number() const { return service_->generation_number(); }
  void WaitUntilAbortIsKnown(double seconds) { service_->WaitUntilAbortIsKnown(seconds); }

 private:
  RendezvousServer() = default;
  std::unique_ptr<RendezvousService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace kubetrain::allreduce

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_RENDEZVOUS_SERVER_H_
