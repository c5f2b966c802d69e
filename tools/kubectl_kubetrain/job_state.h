// A TrainingJob's phase as the plugin reads it from the status the operator
// writes: the type of the last True condition (the current one is last).
// Pure functions; thread-safe.
#ifndef KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_JOB_STATE_H_
#define KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_JOB_STATE_H_

#include <nlohmann/json.hpp>
#include <string>

namespace kubetrain::kubectl_plugin {

// "Running", "Succeeded", ...; "Pending" when no condition is True.
std::string JobPhase(const nlohmann::json& job);
// Succeeded or Failed.
bool JobFinished(const nlohmann::json& job);

}  // namespace kubetrain::kubectl_plugin

#endif  // KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_JOB_STATE_H_
