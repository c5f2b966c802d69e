// StoppedCheckpoints: the checkpoints stopped replicas reported (their
// termination message, pod_status.h StoppedPodCheckpoint), as the pod
// informer's events showed them, by job. A suspended job's pod can be
// deleted right after the update that carries its final status; the
// informer's cache, which a reconcile pass reads, then no longer holds that
// pod, but its events did. The reconciler merges these into
// status.lastCheckpoint on every pass (idempotent: status_planner.h
// RecordLastCheckpoint) and forgets a job once it is gone. One entry per
// replica, the newest step kept. Thread-safe.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_STOPPED_CHECKPOINTS_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_STOPPED_CHECKPOINTS_H_

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "api/checkpoint_message.h"
#include "operator/kube/object.h"

namespace kubetrain::controller {

class StoppedCheckpoints {
 public:
  StoppedCheckpoints() = default;
  StoppedCheckpoints(const StoppedCheckpoints&) = delete;
  StoppedCheckpoints& operator=(const StoppedCheckpoints&) = delete;

  // A pod of job `job_key` was seen (updated or deleted): its reported
  // checkpoint, if any, is kept under its replica ("worker-0", from its
  // labels). Pods without a replica label are ignored.
  void Observe(const std::string& job_key, const kube::Json& pod) ABSL_LOCKS_EXCLUDED(mu_);

  // The checkpoints kept for `job_key`, by replica.
  std::map<std::string, api::CheckpointMessage> Get(const std::string& job_key) const
      ABSL_LOCKS_EXCLUDED(mu_);

  void Forget(const std::string& job_key) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::map<std::string, api::CheckpointMessage>> by_job_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_STOPPED_CHECKPOINTS_H_
