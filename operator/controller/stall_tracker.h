// StallTracker: whether a running TrainingJob still makes progress, from
// what the progress poller reads of each training replica's metrics (its
// global step; whether its metrics answered; how long it has waited for
// peers, the allreduce stall gauge). A job is stalled when no replica's step
// has advanced for runPolicy.stallTimeoutSeconds, or when a replica has
// waited that long for its peers; the stall names the replicas behind: those
// that stopped answering (a frozen process) and those at the lowest step,
// with their pods, nodes and steps ("worker-3 (pod fmnist-worker-3 on
// node-b) has not finished step 4121; others wait at step 4121"). The
// message holds no running times, so the condition it becomes is not
// rewritten on every pass; the condition's lastTransitionTime says since
// when.
// Collective hangs go unnoticed for 10-30 minutes with PyTorch's and
// NCCL's defaults; Kubeflow's operators, JobSet and Volcano never say so in
// a job's status. The reconciler turns the stall into the Stalled condition
// and runPolicy.stallPolicy.
//
// Times are the operator's Clock in seconds. Thread-safe: the poller writes,
// the reconciler's workers read.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_STALL_TRACKER_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_STALL_TRACKER_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace kubetrain::controller {

// One poll's reading of one training replica.
struct ReplicaReading {
  std::string replica;  // "worker-3"
  std::string pod;
  std::string node;
  std::optional<int64_t> step;  // nullopt: its metrics did not answer
  double waiting_seconds = 0;   // how long it has waited for peers (its stall gauge)
  // A parameter server's step is the shards' count of updates, not a
  // worker's: it is named when it stops answering, its step never compared.
  bool trains = true;
};

struct Stall {
  // For the Stalled condition's message and the job's Event.
  std::string message;
  // The pods of the replicas behind (runPolicy.stallPolicy Restart deletes
  // them).
  std::vector<std::string> pods;
};

class StallTracker {
 public:
  // One poll of a job's training replicas at `now`.
  void Observe(const std::string& job_uid, const std::vector<ReplicaReading>& replicas, double now);
  // The job's stall when no replica advanced for `timeout_seconds` (> 0),
  // or one waited that long for its peers; nullopt otherwise, for a job
  // never observed, and for one whose metrics never answered.
  std::optional<Stall> Check(const std::string& job_uid, double timeout_seconds, double now) const;
  // Starts the job over: after its stalled replicas were restarted, or when
  // it is gone.
  void Forget(const std::string& job_uid);

 private:
  struct Replica {
    std::string pod, node;
    std::optional<int64_t> step;  // last read
    bool answered = true;         // at the last poll
    double waiting_seconds = 0;
    bool trains = true;
  };
  struct Job {
    std::map<std::string, Replica> replicas;
    double progressed_at = 0;   // the last time any replica's step moved (or the first poll)
    bool any_answered = false;  // some replica's metrics ever answered
  };

  mutable absl::Mutex mu_;
  std::map<std::string, Job> jobs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_STALL_TRACKER_H_
