#include "tools/kubectl_kubetrain/describe_command.h"

#include "absl/strings/str_cat.h"
#include "tools/kubectl_kubetrain/describe_view.h"
#include "tools/kubectl_kubetrain/replica_ref.h"

namespace kubetrain::kubectl_plugin {

absl::StatusOr<std::string> DescribeJob(ClusterReader& api, const std::string& ns,
                                        const std::string& job, int64_t now_unix_micros) {
  DescribeInput input;
  absl::StatusOr<nlohmann::json> object = api.GetTrainingJob(ns, job);
  if (!object.ok()) return object.status();
  input.job = *std::move(object);
  input.now_unix_micros = now_unix_micros;
  absl::StatusOr<std::vector<nlohmann::json>> pods = api.ListPods(ns, JobPodSelector(job));
  if (!pods.ok()) return pods.status();
  input.pods = *std::move(pods);
  absl::StatusOr<std::vector<nlohmann::json>> events = api.ListEvents(ns);
  if (events.ok()) input.events = *std::move(events);
  std::string screen = RenderDescribe(input);
  if (!events.ok()) {
    absl::StrAppend(&screen, "  (cannot list events: ", events.status().message(), ")\n");
  }
  return screen;
}

}  // namespace kubetrain::kubectl_plugin
