// The replica types of a TrainingJob (TFJob's): PS, Worker, Chief,
// Evaluator, and their names in the spec's keys and in pod names, TF_CONFIG
// and the environment. Stateless and thread-safe.
#ifndef KUBETRAIN_API_REPLICA_TYPE_H_
#define KUBETRAIN_API_REPLICA_TYPE_H_

#include <optional>
#include <string>
#include <string_view>

namespace kubetrain::api {

// Replica types, in the order replicas are started locally.
enum class ReplicaType { kPS, kWorker, kChief, kEvaluator };
inline constexpr ReplicaType kAllReplicaTypes[] = {ReplicaType::kPS, ReplicaType::kWorker,
                                                   ReplicaType::kChief, ReplicaType::kEvaluator};

// "PS", "Worker", "Chief", "Evaluator": the spec's keys.
std::string ReplicaTypeName(ReplicaType type);
// "ps", "worker", "chief", "evaluator": names, TF_CONFIG and env.
std::string ReplicaTypeLower(ReplicaType type);
// Case-insensitive: "worker", "Worker" and "WORKER" are all kWorker.
std::optional<ReplicaType> ParseReplicaType(std::string_view name);

}  // namespace kubetrain::api

#endif  // KUBETRAIN_API_REPLICA_TYPE_H_
