#include "tools/kubectl_kubetrain/kube_cluster_reader.h"

#include "operator/kube/resource.h"

namespace kubetrain::kubectl_plugin {

absl::StatusOr<nlohmann::json> KubeClusterReader::GetTrainingJob(const std::string& ns,
                                                                 const std::string& name) {
  return client_.Get(kube::kTrainingJobs, ns, name);
}

absl::StatusOr<std::vector<nlohmann::json>> KubeClusterReader::ListPods(
    const std::string& ns, const std::string& selector) {
  kube::ListOptions options;
  options.label_selector = selector;
  absl::StatusOr<kube::ObjectList> list = client_.ListAll(kube::kPods, ns, options);
  if (!list.ok()) return list.status();
  return std::move(list->items);
}

absl::StatusOr<std::vector<nlohmann::json>> KubeClusterReader::ListEvents(const std::string& ns) {
  absl::StatusOr<kube::ObjectList> list = client_.ListAll(kube::kEvents, ns);
  if (!list.ok()) return list.status();
  return std::move(list->items);
}

absl::StatusOr<std::string> KubeClusterReader::ReadLog(const std::string& ns,
                                                       const std::string& pod,
                                                       const LogRequest& request) {
  return client_.GetText(PodLogPath(ns, pod, request));
}

absl::StatusOr<std::unique_ptr<kube::HttpStream>> KubeClusterReader::StreamLog(
    const std::string& ns, const std::string& pod, const LogRequest& request) {
  return client_.StreamText(PodLogPath(ns, pod, request), log_idle_timeout_);
}

absl::StatusOr<std::string> KubeClusterReader::ReadMetrics(const std::string& ns,
                                                           const nlohmann::json& pod) {
  nlohmann::json target = pod;
  target["metadata"]["namespace"] = ns;
  return metrics_client_.GetText(PodMetricsProxyPath(target));
}

}  // namespace kubetrain::kubectl_plugin
