// The screen `kubectl kubetrain describe` prints, rendered from the objects
// as the API returns them: the TrainingJob (its status as the operator writes
// it: conditions, lastFailure, replicaStatuses, restartCount,
// disruptionCount, progress; docs/operator.md), its pods and the namespace's
// Events (those about the job or its pods are shown, newest last).
// Pure functions; thread-safe.
#ifndef KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_DESCRIBE_VIEW_H_
#define KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_DESCRIBE_VIEW_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kubetrain::kubectl_plugin {

// kubectl's short ages: "45s", "12m", "3h", "2d".
std::string ShortAge(int64_t micros);

// The Events about the job (involvedObject kind TrainingJob and its name)
// or its pods (kind Pod, a name in `pods`), oldest first, at most `limit`
// (the newest).
std::vector<nlohmann::json> JobEvents(const nlohmann::json& job,
                                      const std::vector<nlohmann::json>& pods,
                                      const std::vector<nlohmann::json>& events, size_t limit);

struct DescribeInput {
  nlohmann::json job;
  std::vector<nlohmann::json> pods;
  std::vector<nlohmann::json> events;  // the namespace's; filtered by JobEvents
  int64_t now_unix_micros = 0;
  size_t max_events = 20;
};
std::string RenderDescribe(const DescribeInput& input);

}  // namespace kubetrain::kubectl_plugin

#endif  // KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_DESCRIBE_VIEW_H_
