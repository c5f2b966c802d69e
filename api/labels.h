// Labels on every Pod and Service of a TrainingJob's replicas
// (docs/design.md); the operator selects its objects by them and reads the
// replica's role back from them. Constants only; thread-safe.
#ifndef KUBETRAIN_API_LABELS_H_
#define KUBETRAIN_API_LABELS_H_

namespace kubetrain::api {

inline constexpr char kLabelJobName[] = "kubetrain.io/job-name";
inline constexpr char kLabelReplicaType[] = "kubetrain.io/replica-type";  // lower-case
inline constexpr char kLabelReplicaIndex[] = "kubetrain.io/replica-index";
// "chief" on the replica that initialises and decides success (IsChiefRole).
inline constexpr char kLabelJobRole[] = "kubetrain.io/job-role";
inline constexpr char kJobRoleChief[] = "chief";
// On the Node that kubetrain-node-agent registers (tools/node_agent, docs/e2e.md).
inline constexpr char kLabelNodeAgent[] = "kubetrain.io/node-agent";

}  // namespace kubetrain::api

#endif  // KUBETRAIN_API_LABELS_H_
