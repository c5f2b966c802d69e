// The environment variables the operator (and `kubetrain run`) set on a
// replica and the runtime reads (docs/design.md; cluster_spec.h's
// ReplicaEnvironment says which and in what order). Constants only;
// thread-safe.
#ifndef KUBETRAIN_API_ENV_VARS_H_
#define KUBETRAIN_API_ENV_VARS_H_

namespace kubetrain::api {

// Kubeflow TFJob's cluster description, byte-compatible (cluster_spec.h).
inline constexpr char kEnvTfConfig[] = "TF_CONFIG";
// Every kubetrain variable starts with this prefix.
inline constexpr char kEnvPrefix[] = "KUBETRAIN_";
// Comma lists of host:port, each only when the type is in the spec.
inline constexpr char kEnvPsHosts[] = "KUBETRAIN_PS_HOSTS";
inline constexpr char kEnvWorkerHosts[] = "KUBETRAIN_WORKER_HOSTS";
inline constexpr char kEnvChiefHosts[] = "KUBETRAIN_CHIEF_HOSTS";
// The replica's identity; also the runtime's constant metric labels.
inline constexpr char kEnvJobName[] = "KUBETRAIN_JOB_NAME";
inline constexpr char kEnvNamespace[] = "KUBETRAIN_NAMESPACE";
inline constexpr char kEnvReplicaType[] = "KUBETRAIN_REPLICA_TYPE";  // lower-case
inline constexpr char kEnvReplicaIndex[] = "KUBETRAIN_REPLICA_INDEX";
// The job's shared secret: every exchange RPC carries it.
// Elastic jobs (spec.elasticPolicy): the Worker replicas the runtime's
// world may shrink to and grow to.
inline constexpr char kEnvMinWorkers[] = "KUBETRAIN_MIN_WORKERS";
inline constexpr char kEnvMaxWorkers[] = "KUBETRAIN_MAX_WORKERS";
inline constexpr char kEnvJobToken[] = "KUBETRAIN_JOB_TOKEN";
// The runtime's metrics port (ports.h's kMetricsPort when unset; 0 = off).
inline constexpr char kEnvMetricsPort[] = "KUBETRAIN_METRICS_PORT";
// Where a failing runtime writes its one-line error, the container's
// termination message (Kubernetes mounts /dev/termination-log, which the
// runtime uses when this is unset; the local node agent sets this to a file
// of its own and reads it back into the pod's status).
inline constexpr char kEnvTerminationLog[] = "KUBETRAIN_TERMINATION_LOG";
inline constexpr char kDefaultTerminationLog[] = "/dev/termination-log";
// torch.distributed-style variables for jobs without parameter servers.
inline constexpr char kEnvMasterAddr[] = "MASTER_ADDR";
inline constexpr char kEnvMasterPort[] = "MASTER_PORT";
inline constexpr char kEnvWorldSize[] = "WORLD_SIZE";
inline constexpr char kEnvRank[] = "RANK";

}  // namespace kubetrain::api

#endif  // KUBETRAIN_API_ENV_VARS_H_
