// The observe step of a reconcile pass: the pods and Services a TrainingJob
// controls (controller ownerReference to its uid), read from the informer
// caches and sorted by replica: pods of a replica the spec has, pods
// outside it (scaled down, or without replica labels), Services per replica
// and the job's own Service (serviceMode PerJob). Stateless and thread-safe;
// the objects are the caches' immutable ones, shared, not copied.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_JOB_OBJECTS_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_JOB_OBJECTS_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "api/training_job.h"
#include "operator/kube/object_cache.h"

namespace kubetrain::controller {

// A replica: its type and index.
using ReplicaKey = std::pair<api::ReplicaType, int>;
using ReplicaObjects = std::map<ReplicaKey, kube::ObjectPtr>;

struct JobObjects {
  ReplicaObjects pods;                      // replicas of the spec
  ReplicaObjects services;                  // per replica (serviceMode PerReplica)
  kube::ObjectPtr job_service;              // named as the job (serviceMode PerJob); may be null
  std::vector<kube::ObjectPtr> stray_pods;  // outside the spec (scaled down)
};

// The objects of `job` (uid `uid`) in the pod and Service caches (indexed
// by kube::kIndexOwnerUid).
JobObjects CollectJobObjects(const api::TrainingJob& job, const std::string& uid,
                             const kube::ObjectCache& pods, const kube::ObjectCache& services);

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_JOB_OBJECTS_H_
