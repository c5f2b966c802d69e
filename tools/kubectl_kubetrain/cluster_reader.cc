#include "tools/kubectl_kubetrain/cluster_reader.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/ports.h"
#include "operator/kube/object.h"
#include "operator/kube/resource.h"

namespace kubetrain::kubectl_plugin {

std::string PodLogPath(absl::string_view ns, absl::string_view pod, const LogRequest& request) {
  return absl::StrCat(
      kube::ResourcePath(kube::kPods, ns, pod, "log"),
      kube::QueryString(
          {{"container", request.container},
           {"follow", request.follow ? "true" : ""},
           {"previous", request.previous ? "true" : ""},
           {"timestamps", request.timestamps ? "true" : ""},
           {"sinceTime", request.since_unix_micros
                             ? kube::FormatTime(*request.since_unix_micros / 1000000 * 1000000)
                             : ""}}));
}

std::string PodMetricsProxyPath(const nlohmann::json& pod) {
  int port = 0;
  if (!absl::SimpleAtoi(kube::Annotation(pod, api::kPrometheusPortAnnotation), &port) ||
      port <= 0 || port > 65535) {
    port = api::kMetricsPort;
  }
  std::string path = kube::Annotation(pod, api::kPrometheusPathAnnotation);
  if (path.empty() || path[0] != '/') path = api::kMetricsPath;
  return absl::StrCat(kube::ResourcePath(kube::kPods, kube::Namespace(pod)), "/", kube::Name(pod),
                      ":", port, "/proxy", path);
}

}  // namespace kubetrain::kubectl_plugin
