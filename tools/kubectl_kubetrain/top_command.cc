#include "tools/kubectl_kubetrain/top_command.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "operator/controller/prometheus_text.h"
#include "operator/kube/object.h"
#include "tools/kubectl_kubetrain/job_state.h"

namespace kubetrain::kubectl_plugin {

absl::StatusOr<TopSnapshot> CollectTop(ClusterReader& api, const std::string& ns,
                                       const std::string& job_name,
                                       std::map<std::string, ReplicaMetrics>* previous) {
  absl::StatusOr<nlohmann::json> job = api.GetTrainingJob(ns, job_name);
  if (!job.ok()) return job.status();
  absl::StatusOr<std::vector<nlohmann::json>> pods = api.ListPods(ns, JobPodSelector(job_name));
  if (!pods.ok()) return pods.status();
  TopSnapshot snapshot;
  snapshot.phase = JobPhase(*job);
  snapshot.finished = JobFinished(*job);
  std::map<std::string, ReplicaMetrics> current;
  for (const nlohmann::json& pod : *pods) {
    std::optional<PodView> view = ViewOfPod(pod, "");
    if (!view) continue;
    TopRow row;
    row.replica = view->replica;
    row.pod = view->pod;
    row.restarts = view->restarts;
    if (view->phase != "Running") {
      row.problem = absl::StrCat("pod ", view->phase.empty() ? "Pending" : view->phase);
      if (!view->waiting_reason.empty()) absl::StrAppend(&row.problem, ": ", view->waiting_reason);
    } else if (!view->running) {
      row.problem = absl::StrCat(
          "container ", view->container, " not running",
          view->waiting_reason.empty() ? "" : absl::StrCat(": ", view->waiting_reason));
    } else {
      absl::StatusOr<std::string> page = api.ReadMetrics(ns, pod);
      absl::StatusOr<controller::PrometheusExposition> parsed =
          page.ok() ? controller::ParsePrometheusText(*page)
                    : absl::StatusOr<controller::PrometheusExposition>(page.status());
      if (!page.ok()) {
        row.problem = absl::StrCat("metrics: ", page.status().message());
      } else if (!parsed.ok()) {
        row.problem = absl::StrCat("metrics page: ", parsed.status().message());
      } else {
        const ReplicaMetrics* before = nullptr;
        if (previous != nullptr) {
          auto it = previous->find(view->uid);
          if (it != previous->end()) before = &it->second;
        }
        row.metrics = ReadReplicaMetrics(*parsed, before);
        current[view->uid] = *row.metrics;
      }
    }
    snapshot.rows.push_back(std::move(row));
  }
  std::stable_sort(snapshot.rows.begin(), snapshot.rows.end(),
                   [](const TopRow& a, const TopRow& b) { return a.replica < b.replica; });
  if (previous != nullptr) *previous = std::move(current);
  return snapshot;
}

}  // namespace kubetrain::kubectl_plugin
