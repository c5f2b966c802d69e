// RendezvousClient: one rank's side of the rendezvous. Join() retries until
// a generation of the world forms with this rank or --rendezvous-timeout
// passes; then a heartbeat thread reports this rank's collective progress
// to rank 0 and keeps the latest view of every peer, which the stall
// detector reads. AbortStatus() turns non-OK once the generation is over
// (any rank reported a lost peer, one left, one joined) or rank 0 itself has
// not answered for the peer timeout. Join again (after StopHeartbeats) for
// the next generation. Thread-safe.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_RENDEZVOUS_CLIENT_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_RENDEZVOUS_CLIENT_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "kubetrain/v1/collective.grpc.pb.h"

namespace kubetrain::allreduce {

struct RendezvousClientOptions {
  std::string address;  // rank 0's rendezvous host:port
  std::string token;
  int rank = 0;  // this replica's index (its rank in the first generation of a fixed world)
  int world_size = 1;
  std::string name;          // this replica, e.g. "worker-1"
  std::string rank0_name;    // for messages when rank 0 is the one lost
  std::string data_address;  // this rank's data-plane host:port
  std::string device_uuid;   // the GPU of this rank's tensors; empty: host memory
  uint64_t incarnation = 1;
  double join_timeout_seconds = 300;
  double peer_timeout_seconds = 120;
  double heartbeat_seconds = 1;
};

// What this rank knows of one peer.
struct PeerView {
  int rank = 0;
  std::string name;
  int64_t collectives_started = 0;
  double seconds_since_heartbeat = 0;
};

class RendezvousClient {
 public:
  RendezvousClient(RendezvousClientOptions options, const Clock& clock,
                   std::function<void(const std::string&)> log);
  ~RendezvousClient();  // stops heartbeats

  // `state_step`: the step this rank's state continues from, -1 for none;
  // `last_generation`: the generation number it last trained in, 0 for
  // none (JoinRequest).
  absl::StatusOr<v1::JoinResponse> Join(int64_t state_step = -1, uint64_t last_generation = 0)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Starts the heartbeat thread (after Join) as `rank` of the generation
  // (default: options' rank), forgetting the last generation's abort.
  // StartHeartbeats and StopHeartbeats are called by the owner's thread only.
  void StartHeartbeats(uint64_t generation, int rank = -1) ABSL_LOCKS_EXCLUDED(mu_);
  void StopHeartbeats() ABSL_LOCKS_EXCLUDED(mu_);
  void SetProgress(int64_t started, int64_t finished) {
    started_ = started;
    finished_ = finished;
  }

  std::vector<PeerView> Peers() const ABSL_LOCKS_EXCLUDED(mu_);
  // OK while the generation is alive; else Aborted with the shared reason.
  absl::Status AbortStatus() const ABSL_LOCKS_EXCLUDED(mu_);
  int lost_rank() const ABSL_LOCKS_EXCLUDED(mu_);

  // Reports that this rank lost `lost_rank` (-1: unknown) and returns the
  // reason every rank gives: the first one recorded, maybe another rank's.
  // When rank 0 does not answer, it is the one lost.
  absl::Status ReportAbort(int lost_rank, const std::string& reason) ABSL_LOCKS_EXCLUDED(mu_);
  // This rank leaves on purpose (SIGTERM): rank 0 takes it out of the world
  // (the others re-form without it, or wait for its replacement), and this
  // rank's generation is over, as is every later one (CancelJoins too).
  // Best effort: returns without waiting long.
  void Leave(const std::string& reason) ABSL_LOCKS_EXCLUDED(mu_);
  // This rank will not join another generation (it leaves once the step in
  // flight ends): a Join in progress, waiting for a rank 0 that may never
  // come back (a suspended job), returns Cancelled now, and so does every
  // later one. The running generation, if any, goes on.
  void CancelJoins(const std::string& reason) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void HeartbeatLoop(uint64_t generation, int rank) ABSL_LOCKS_EXCLUDED(mu_);
  // The Abort call for this rank of the current generation (sets *rank).
  grpc::Status SendAbort(int lost_rank, const std::string& reason, bool leaving, int* rank,
                         v1::AbortResponse* resp) ABSL_LOCKS_EXCLUDED(mu_);
  void SetAbort(int lost_rank, const std::string& reason) ABSL_LOCKS_EXCLUDED(mu_);
  // The heartbeat thread has to act now: stop, or confirm an abort reason.
  bool HeartbeatDueLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Set at construction, read without the lock.
  const RendezvousClientOptions options_;
  const Clock& clock_;
  const std::function<void(const std::string&)> log_;
  std::shared_ptr<grpc::Channel> channel_;  // thread-safe gRPC objects
  std::unique_ptr<v1::Rendezvous::Stub> stub_;
  // Atomics, not guarded: written by SetProgress, read by the heartbeat thread.
  std::atomic<int64_t> started_{0}, finished_{0};

  mutable absl::Mutex mu_;
  absl::CondVar cv_;  // with mu_: stop_, or an abort reason to confirm; Join's retry backoff
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int rank_ ABSL_GUARDED_BY(mu_) = 0;  // in generation_
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<PeerView> peers_ ABSL_GUARDED_BY(mu_);
  std::string abort_reason_ ABSL_GUARDED_BY(mu_);
  int lost_rank_ ABSL_GUARDED_BY(mu_) = -1;
  // Rank 0 has our heartbeat saying we know.
  bool abort_confirmed_ ABSL_GUARDED_BY(mu_) = false;
  // CancelJoins' reason: no Join from now on. Leave's reason: every later
  // generation is over for this rank too (StartHeartbeats keeps it).
  std::string cancel_joins_reason_ ABSL_GUARDED_BY(mu_);
  std::string left_reason_ ABSL_GUARDED_BY(mu_);
  // The Join call in flight, cancelled by CancelJoins.
  grpc::ClientContext* join_call_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Not guarded: started (under mu_) and joined only by the owner's thread.
  std::thread heartbeat_;
};

}  // namespace kubetrain::allreduce

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_RENDEZVOUS_CLIENT_H_
