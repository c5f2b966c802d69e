// LeaderElector: one active operator among replicas, through a
// coordination.k8s.io/v1 Lease (client-go's leaderelection semantics).
//
// - Acquire: create the Lease, or take it over when it is released
//   (holderIdentity "") or its holder has not renewed for leaseDuration as
//   observed locally (the record unchanged since we first saw it; clocks of
//   different machines are never compared).
// - Renew every retryPeriod; when no renewal succeeded for renewDeadline,
//   step down: on_stopped_leading runs and Run() returns kAborted, so the
//   caller stops reconciling (the operator exits and is restarted).
// - Stop(): a leader releases the Lease (holderIdentity "", duration 1 s) so
//   a successor takes over at once.
// Every write is an update with resourceVersion: two candidates racing get
// one 409, so they never both lead.
//
// Thread-safe: Run() on one thread; Stop/IsLeader from any.
#ifndef KUBETRAIN_OPERATOR_KUBE_LEADER_ELECTOR_H_
#define KUBETRAIN_OPERATOR_KUBE_LEADER_ELECTOR_H_

#include <atomic>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "operator/kube/clock_waiter.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/logger.h"

namespace kubetrain::kube {

// The Lease's name unless --leader-election-id says otherwise.
inline constexpr char kDefaultLeaseName[] = "kubetrain-operator";

struct LeaderElectionConfig {
  std::string lease_namespace = "default";
  std::string lease_name = kDefaultLeaseName;
  std::string identity;  // unique per candidate: pod name + random suffix
  absl::Duration lease_duration = absl::Seconds(15);
  absl::Duration renew_deadline = absl::Seconds(10);
  absl::Duration retry_period = absl::Seconds(2);
  bool release_on_stop = true;
};

// Checks lease_duration > renew_deadline > retry_period > 0 and a non-empty
// identity/name, with a message naming the flag at fault.
absl::Status ValidateLeaderElectionConfig(const LeaderElectionConfig& config);

struct LeaderCallbacks {
  std::function<void()> on_started_leading;  // on the Run() thread
  std::function<void()> on_stopped_leading;  // on the Run() thread
  std::function<void(const std::string& identity)> on_new_leader;
};

class LeaderElector {
 public:
  // Borrows client, clock and logger.
  LeaderElector(KubeClient& client, LeaderElectionConfig config, LeaderCallbacks callbacks,
                const Clock& clock, Logger* logger);
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // Blocks: acquires, leads, renews. Returns OK after Stop(), kAborted when
  // leadership was lost.
  absl::Status Run();
  void Stop();

  bool IsLeader() const { return leading_.load(); }
  std::string LeaderIdentity() const;

 private:
  enum class Attempt { kHeld, kNotHeld, kFailed };
  // One acquire-or-renew round.
  Attempt TryAcquireOrRenew();
  void Release();
  bool WaitUnlessStopped(absl::Duration d);
  void ObserveHolder(const std::string& holder);
  // The clock's wall time as a Kubernetes MicroTime.
  std::string NowMicroTime() const;

  KubeClient& client_;
  const LeaderElectionConfig config_;
  const LeaderCallbacks callbacks_;
  const Clock& clock_;
  Logger* const logger_;
  const std::string log_name_;
  std::atomic<bool> leading_{false};

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::string observed_holder_ ABSL_GUARDED_BY(mu_);
  ClockWaiter waiter_;  // retry waits, on clock_ and mu_
  // What we last saw of the record and when (local clock), to judge expiry.
  std::string observed_record_;
  int64_t observed_at_nanos_ = 0;
  std::string lease_resource_version_;
  int64_t lease_transitions_ = 0;
};

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_OPERATOR_KUBE_LEADER_ELECTOR_H_
