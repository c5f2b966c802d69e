// The decisions a reconcile pass makes for an elastic job
// (spec.elasticPolicy), as pure functions over the observed pods: whether it
// waits for workers (the Waiting condition: fewer running workers than
// minReplicas) and what a refused scale says (Worker replicas outside
// [minReplicas, maxReplicas], clamped by api::ClampElasticWorkers: the
// ScaleRefused event and the Running condition's note). Scaling down
// (pod_planner.h StrayPodsToDelete, service_planner.h
// StrayServicesToDelete) deletes the highest indexes first.
// Stateless and thread-safe.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_ELASTIC_WORKERS_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_ELASTIC_WORKERS_H_

#include <optional>
#include <string>

#include "api/training_job.h"
#include "operator/controller/job_objects.h"

namespace kubetrain::controller {

// Worker pods of the spec in phase Running and not being deleted.
int RunningWorkers(const ReplicaObjects& pods);

// The Waiting condition's message when an elastic job has fewer running
// workers than minReplicas ("needs 1 more worker: 1 of minReplicas 2
// running"); nullopt when it has enough or is not elastic.
std::optional<std::string> WaitingMessage(const api::TrainingJob& job, const ReplicaObjects& pods);

// The ScaleRefused event's message, also appended to the Running condition's:
// "spec.replicaSpecs.Worker.replicas 6 is above spec.elasticPolicy.maxReplicas
// 4: running 4 workers".
std::string ScaleRefusedMessage(const api::ElasticClamp& clamp);

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_ELASTIC_WORKERS_H_
