// TrainingJob status, typed: what kubetrain-operator writes through the
// /status subresource and what `kubectl get/describe tj`, the progress
// poller and the kubectl plugin read. The fields mirror the CRD's status
// schema (crds/kubetrain.io_trainingjobs.yaml); times are RFC 3339 strings
// exactly as stored, so a read and a write leave them byte for byte.
//
// JSON (StatusToJson) is what clients have always seen:
//   - every condition carries all six fields;
//   - a replica status carries its five counters and selector, and
//     completedIndexes (ascending) only when some index completed;
//   - lastFailure omits podUID when empty and exitCode when unset (a pod
//     deleted or lost with its node has none); its other fields are always
//     there;
//   - restartCount, disruptionCount, lastFailure, progress, worldSize,
//     generation and each
//     progress field appear only when set; the times, only when not empty;
//     conditions and replicaStatuses only when not empty;
//   - progress's numbers are doubles: a loss the API server stored as 1
//     (Go writes 1.0 so) reads as 1.0, equal to it, and is written 1.0.
// tests/packaging/crd.test.mjs checks the CRD's status schema against the
// keys this file reads and writes.
// StatusFromJson reads that back (null fields count as absent, unknown
// fields are ignored, as the API server prunes them) and refuses a value of
// the wrong type, or an unknown condition status or replica type, with an
// InvalidArgument error naming the field ("status.lastFailure.exitCode:
// must be an integer, got \"x\"").
// Value types; thread-compatible.
#ifndef KUBETRAIN_API_JOB_STATUS_H_
#define KUBETRAIN_API_JOB_STATUS_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "api/replica_type.h"

namespace kubetrain::api {

// Condition types (the CRD's enum).
inline constexpr char kCondCreated[] = "Created";
inline constexpr char kCondRunning[] = "Running";
inline constexpr char kCondRestarting[] = "Restarting";
inline constexpr char kCondSucceeded[] = "Succeeded";
inline constexpr char kCondFailed[] = "Failed";
inline constexpr char kCondSuspended[] = "Suspended";
// No replica progressed for runPolicy.stallTimeoutSeconds (set True last, so
// `kubectl get tj` shows it while it holds; False again once progress resumes).
inline constexpr char kCondStalled[] = "Stalled";
// A replica's pod stayed unscheduled past runPolicy.schedulingTimeoutSeconds
// (False again, reason Scheduled, once every pod has a node).
inline constexpr char kCondUnschedulable[] = "Unschedulable";
// An elastic job (spec.elasticPolicy) has fewer running workers than
// minReplicas (pending, unschedulable or lost): True naming how many more it
// needs, False again once enough run.
inline constexpr char kCondWaiting[] = "Waiting";

enum class ConditionStatus { kTrue, kFalse, kUnknown };
// "True", "False", "Unknown".
std::string ConditionStatusName(ConditionStatus status);
std::optional<ConditionStatus> ParseConditionStatus(std::string_view name);

struct Condition {
  std::string type;  // kCond*
  ConditionStatus status = ConditionStatus::kUnknown;
  std::string reason;
  std::string message;
  std::string last_update_time;
  std::string last_transition_time;
  bool operator==(const Condition&) const = default;
};

// status.replicaStatuses.<Type>.
struct ReplicaStatus {
  int32_t active = 0;
  int32_t ready = 0;
  int32_t succeeded = 0;
  int32_t failed = 0;
  int32_t restarts = 0;                 // pods of this type recreated after a failure
  std::set<int32_t> completed_indexes;  // succeeded indexes, never run again
  std::string selector;                 // the label selector of the type's pods
  bool operator==(const ReplicaStatus&) const = default;
};

// status.lastFailure: the latest replica failure (api/failure_reason.h).
struct LastFailure {
  ReplicaType replica_type = ReplicaType::kWorker;
  int32_t replica_index = 0;
  std::string pod;
  std::string pod_uid;  // empty: not written
  std::string node;
  std::optional<int32_t> exit_code;  // unset for a pod deleted or lost, not exited
  std::string reason;                // FailureReasonName
  std::string message;
  std::string time;
  bool operator==(const LastFailure&) const = default;
};

// status.lastCheckpoint: the newest checkpoint a replica reported when it
// was stopped (SIGTERM: a suspended job, a deleted or preempted pod), read
// from its termination message (api/checkpoint_message.h).
struct LastCheckpoint {
  int64_t step = 0;
  std::string replica;  // "worker-0", "ps-1"
  std::string path;
  std::string time;  // when the operator saw it
  bool operator==(const LastCheckpoint&) const = default;
};

// status.progress: the chief's latest training metrics (beyond TFJob).
struct Progress {
  std::optional<int64_t> step;
  std::optional<int64_t> total_steps;
  std::optional<double> loss;
  std::optional<double> accuracy;
  std::optional<double> samples_per_second;
  std::string updated_at;  // empty: not written
  bool operator==(const Progress&) const = default;
};

struct JobStatus {
  // The current condition last (`kubectl get tj` shows conditions[-1:]).
  std::vector<Condition> conditions;
  std::map<ReplicaType, ReplicaStatus> replica_statuses;
  std::optional<int32_t> restart_count;     // counted against backoffLimit
  std::optional<int32_t> disruption_count;  // counted against maxDisruptions
  std::optional<LastFailure> last_failure;
  std::optional<LastCheckpoint> last_checkpoint;
  std::string start_time;
  std::string completion_time;
  std::string last_reconcile_time;
  std::optional<Progress> progress;
  // The runtime's allreduce world, from the chief's metrics (the progress
  // poller): its size and generation (api/metric_names.h kMetricWorldSize,
  // kMetricWorldGeneration).
  std::optional<int32_t> world_size;
  std::optional<int64_t> generation;
  bool operator==(const JobStatus&) const = default;
};

// The condition of `type`, or null when absent.
const Condition* FindCondition(const JobStatus& status, std::string_view type);
// True when the condition of `type` exists with status True.
bool IsConditionTrue(const JobStatus& status, std::string_view type);
// The type of the last True condition ("" when none): the job's phase.
std::string Phase(const JobStatus& status);

// `json` is a job's .status (null or absent: an empty status).
absl::StatusOr<JobStatus> StatusFromJson(const nlohmann::json& json);
nlohmann::json StatusToJson(const JobStatus& status);
// status.progress alone (the progress poller's merge patch).
nlohmann::json ProgressToJson(const Progress& progress);

}  // namespace kubetrain::api

#endif  // KUBETRAIN_API_JOB_STATUS_H_
