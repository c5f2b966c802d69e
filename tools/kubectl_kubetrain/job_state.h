// A TrainingJob's status and phase as the plugin reads them from what the
// operator writes: the phase is the type of the last True condition (the
// current one is last).
// Pure functions; thread-safe.
#ifndef KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_JOB_STATE_H_
#define KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_JOB_STATE_H_

#include <nlohmann/json.hpp>
#include <string>

#include "api/job_status.h"

namespace kubetrain::kubectl_plugin {

// The job's status, typed (api/job_status.h); empty when it has none, or one
// that does not read (the plugin shows what it can, it does not refuse).
api::JobStatus JobStatusOf(const nlohmann::json& job);

// "Running", "Succeeded", ...; "Pending" when no condition is True.
std::string JobPhase(const nlohmann::json& job);
// Succeeded or Failed.
bool JobFinished(const nlohmann::json& job);

}  // namespace kubetrain::kubectl_plugin

#endif  // KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_JOB_STATE_H_
