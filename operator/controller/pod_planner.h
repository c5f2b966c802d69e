// Which pods of a TrainingJob to create and which to delete, as pure
// decisions over the observed objects (job_objects.h) and the job's status:
// the replicas without a pod (a completed replica is never run again, even
// when its pod is gone: status.replicaStatuses.<Type>.completedIndexes),
// pods outside the spec, pods cleanPodPolicy removes once the job finished,
// pods a suspended job stops. The failure policy's deletes are
// failure_policy.h's. The reconciler records expectations and acts.
// Stateless and thread-safe.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_POD_PLANNER_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_POD_PLANNER_H_

#include <string>
#include <vector>

#include "api/job_status.h"
#include "api/training_job.h"
#include "operator/controller/job_objects.h"

namespace kubetrain::controller {

// True when replica `k` succeeded: its pod did, or its index is recorded
// in status as completed.
bool ReplicaCompleted(const ReplicaObjects& pods, const api::JobStatus& status, ReplicaKey k);

struct PodToCreate {
  ReplicaKey replica;
  std::string name;  // <job>-<type>-<index>
};

// Replicas of the spec with no pod that have not completed, in replica order.
std::vector<PodToCreate> MissingPods(const api::TrainingJob& job, const ReplicaObjects& pods,
                                     const api::JobStatus& status);

// Pods outside the spec that are not being deleted yet: the replicas a
// scale-down removed, by type, highest index first, then pods without
// replica labels. Their deletion is no failure and no restart: they are not
// the spec's, so the failure policy and the success policy never see them,
// and nothing recreates them.
std::vector<kube::ObjectPtr> StrayPodsToDelete(const JobObjects& objects);

// A pod cleanPodPolicy removes, with its replica's Service (null when none
// or for a stray pod).
struct CleanUpItem {
  kube::ObjectPtr pod;
  kube::ObjectPtr service;
};

// After the job finished: None keeps every pod; Running (the default)
// removes pods not Succeeded or Failed; All removes every pod. Pods being
// deleted are skipped; stray pods always go. Replica order, strays last.
std::vector<CleanUpItem> PodsToCleanUp(api::CleanPodPolicy policy, const JobObjects& objects);

// A suspended job's pods to delete: every one not Succeeded nor being
// deleted.
std::vector<kube::ObjectPtr> PodsToSuspend(const ReplicaObjects& pods);

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_POD_PLANNER_H_
