// Conditions on a TrainingJob's status (api/job_status.h), with Kubeflow's
// rules:
//   - one entry per type; lastTransitionTime changes only when the status
//     flips, lastUpdateTime whenever reason/message/status change;
//   - a condition set True moves to the end of the list, so the printer
//     column `.status.conditions[-1:].type` shows the current state;
//   - Succeeded or Failed turn Running and Restarting False; Running turns
//     Restarting False and vice versa; Failed is final (IsFinished).
// Reading them (FindCondition, IsConditionTrue, Phase) is api/job_status.h.
// Stateless functions; thread-safe.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_JOB_STATUS_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_JOB_STATUS_H_

#include <string>

#include "api/job_status.h"

namespace kubetrain::controller {

using api::kCondCreated;
using api::kCondFailed;
using api::kCondRestarting;
using api::kCondRunning;
using api::kCondStalled;
using api::kCondSucceeded;
using api::kCondSuspended;
using api::kCondUnschedulable;
using api::kCondWaiting;

// Sets the condition (see the rules above). `now` is an RFC 3339 time.
void SetCondition(api::JobStatus& status, const std::string& type, bool value,
                  const std::string& reason, const std::string& message, const std::string& now);
bool IsFinished(const api::JobStatus& status);  // Succeeded or Failed

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_JOB_STATUS_H_
