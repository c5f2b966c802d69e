#include "operator/controller/world_membership.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/labels.h"
#include "api/metric_names.h"
#include "operator/kube/object.h"

namespace kubetrain::controller {

std::vector<std::pair<std::string, std::string>> ReplicaMetricLabels(const nlohmann::json& pod,
                                                                     const std::string& job_name) {
  return {
      {api::kMetricLabelJob, job_name},
      {api::kMetricLabelNamespace, kube::Namespace(pod)},
      {api::kMetricLabelReplicaType, kube::Label(pod, api::kLabelReplicaType)},
      {api::kMetricLabelReplicaIndex, kube::Label(pod, api::kLabelReplicaIndex)},
  };
}

WorldReading WorldFromMetrics(const PrometheusExposition& page, const nlohmann::json& pod,
                              const std::string& job_name) {
  const std::vector<std::pair<std::string, std::string>> expected =
      ReplicaMetricLabels(pod, job_name);
  WorldReading world;
  for (const PrometheusSample& sample : page.samples) {
    if (!SampleMatches(sample, expected) || !std::isfinite(sample.value)) continue;
    // Counts beyond what the fields hold are no readings.
    if (sample.name == api::kMetricWorldSize && !world.size && sample.value >= 0 &&
        sample.value < 2147483647.0) {
      world.size = static_cast<int32_t>(std::llround(sample.value));
    } else if (sample.name == api::kMetricWorldGeneration && !world.generation &&
               sample.value >= 0 && sample.value < 9.2e18) {
      world.generation = std::llround(sample.value);
    } else if (sample.name == api::kMetricWorldMember && sample.value == 1) {
      auto it = sample.labels.find(api::kMetricLabelMember);
      if (it != sample.labels.end() && !it->second.empty()) world.members.insert(it->second);
    }
  }
  return world;
}

MembershipChange DiffMembership(int64_t generation, std::optional<int64_t> step, int32_t world_size,
                                const std::set<std::string>* previous,
                                const std::set<std::string>& current) {
  MembershipChange change;
  change.generation = generation;
  change.step = step;
  change.world_size = world_size;
  if (previous == nullptr) return change;
  for (const std::string& m : current) {
    if (!previous->contains(m)) change.joined.push_back(m);
  }
  for (const std::string& m : *previous) {
    if (!current.contains(m)) change.left.push_back(m);
  }
  return change;
}

std::string MembershipChangedMessage(const MembershipChange& change) {
  std::string out = absl::StrCat("generation ", change.generation, " formed");
  if (change.step) absl::StrAppend(&out, " at step ", *change.step);
  absl::StrAppend(&out, ": world ", change.world_size);
  std::vector<std::string> parts;
  if (!change.joined.empty())
    parts.push_back(absl::StrCat("joined ", absl::StrJoin(change.joined, ", ")));
  if (!change.left.empty())
    parts.push_back(absl::StrCat("left ", absl::StrJoin(change.left, ", ")));
  if (!parts.empty()) absl::StrAppend(&out, " (", absl::StrJoin(parts, "; "), ")");
  return out;
}

}  // namespace kubetrain::controller
