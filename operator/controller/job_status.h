// Conditions on a TrainingJob's status (JSON), with Kubeflow's rules:
//   - one entry per type; lastTransitionTime changes only when the status
//     flips, lastUpdateTime whenever reason/message/status change;
//   - a condition set True moves to the end of the list, so the printer
//     column `.status.conditions[-1:].type` shows the current state;
//   - Succeeded or Failed turn Running and Restarting False; Running turns
//     Restarting False and vice versa; Failed is final (IsFinished).
// Stateless functions; thread-safe.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_JOB_STATUS_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_JOB_STATUS_H_

#include <nlohmann/json.hpp>
#include <string>

namespace kubetrain::controller {

using Json = nlohmann::json;

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

// True when the condition of `type` exists with status "True".
bool IsConditionTrue(const Json& status, const std::string& type);
// The condition object, or null when absent.
const Json* FindCondition(const Json& status, const std::string& type);
// Sets the condition (see the rules above). `now` is an RFC 3339 time.
void SetCondition(Json& status, const std::string& type, bool value, const std::string& reason,
                  const std::string& message, const std::string& now);
bool IsFinished(const Json& status);  // Succeeded or Failed
// The type of the last True condition ("" when none): the job's phase.
std::string Phase(const Json& status);

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_JOB_STATUS_H_
