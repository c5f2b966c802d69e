#include "tools/kubectl_kubetrain/logs_command.h"

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tools/kubectl_kubetrain/log_lines.h"

namespace kubetrain::kubectl_plugin {

absl::Status PrintLogs(ClusterReader& api, const LogsOptions& options, std::ostream& out,
                       std::ostream& err) {
  absl::StatusOr<nlohmann::json> job = api.GetTrainingJob(options.ns, options.job);
  if (!job.ok()) return job.status();
  absl::StatusOr<std::vector<nlohmann::json>> pods =
      api.ListPods(options.ns, JobPodSelector(options.job));
  if (!pods.ok()) return pods.status();
  std::vector<PodView> views;
  for (const nlohmann::json& pod : *pods) {
    std::optional<PodView> view = ViewOfPod(pod, options.container);
    if (!view || (options.only && !(view->replica == *options.only))) continue;
    views.push_back(std::move(*view));
  }
  if (views.empty()) {
    return absl::NotFoundError(
        options.only ? absl::StrCat("trainingjob ", options.job, " has no pod for replica ",
                                    ReplicaName(*options.only))
                     : absl::StrCat("trainingjob ", options.job, " has no pods"));
  }
  std::stable_sort(views.begin(), views.end(),
                   [](const PodView& a, const PodView& b) { return a.replica < b.replica; });
  std::vector<ReplicaLog> logs;
  for (const PodView& view : views) {
    LogRequest request;
    request.container = view.container;
    request.previous = options.previous;
    absl::StatusOr<std::string> text = api.ReadLog(options.ns, view.pod, request);
    if (!text.ok() && absl::IsInvalidArgument(text.status())) {
      // A 400: a container not started yet, or a log server without per-line
      // times (kubetrain-node-agent); the latter answers without them, and
      // such a log is merged after the timed ones, in its own order.
      // Either way the second answer is the one to report.
      request.timestamps = false;
      text = api.ReadLog(options.ns, view.pod, request);
    }
    if (!text.ok()) {
      err << "kubectl-kubetrain: " << ReplicaName(view.replica) << " (pod " << view.pod
          << "): " << text.status().message() << "\n";
      continue;
    }
    const int restart = options.previous ? std::max(0, view.restarts - 1) : view.restarts;
    logs.push_back(ReplicaLog{LogPrefix(view.replica, restart), *std::move(text)});
  }
  out << MergeLogs(logs);
  out.flush();
  if (logs.empty()) {
    return absl::FailedPreconditionError("no replica's log could be read");
  }
  return absl::OkStatus();
}

}  // namespace kubetrain::kubectl_plugin
