// The runtime's allreduce world as the chief's metrics page shows it
// (api/metric_names.h: kMetricWorldSize, kMetricWorldGeneration and, on rank
// 0, one kMetricWorldMember{member="worker-3"} 1 series per member), and the
// MembershipChanged event's message for a new generation. Pure functions;
// thread-safe.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_WORLD_MEMBERSHIP_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_WORLD_MEMBERSHIP_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "operator/controller/prometheus_text.h"

namespace kubetrain::controller {

struct WorldReading {
  std::optional<int32_t> size;
  std::optional<int64_t> generation;
  std::set<std::string> members;  // "worker-0", ... (value 1 series only)
  bool operator==(const WorldReading&) const = default;
};

// The constant labels (api/metric_names.h) that mark the runtime metrics of
// the replica `pod` runs for `job_name`: what status.progress and the world
// are read by (SampleMatches).
std::vector<std::pair<std::string, std::string>> ReplicaMetricLabels(const nlohmann::json& pod,
                                                                     const std::string& job_name);

// The world in `page` for the replica `pod` runs (samples whose constant
// labels match the pod, as for status.progress).
WorldReading WorldFromMetrics(const PrometheusExposition& page, const nlohmann::json& pod,
                              const std::string& job_name);

// A new generation of a job's world, for the MembershipChanged event.
struct MembershipChange {
  int64_t generation = 0;
  std::optional<int64_t> step;  // the chief's global step, when it reports one
  int32_t world_size = 0;
  std::vector<std::string> joined;  // members of this generation not in the previous one
  std::vector<std::string> left;    // members of the previous one not in this one
};

// Joined and left from the previous and the new generation's members;
// both empty when the previous members are unknown (`previous` null).
MembershipChange DiffMembership(int64_t generation, std::optional<int64_t> step, int32_t world_size,
                                const std::set<std::string>* previous,
                                const std::set<std::string>& current);

// "generation 4 formed at step 1200: world 4 (joined worker-3)"; "left ..."
// after "joined ..." with "; " between; no parenthesis when neither; no
// "at step" without a step.
std::string MembershipChangedMessage(const MembershipChange& change);

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_WORLD_MEMBERSHIP_H_
