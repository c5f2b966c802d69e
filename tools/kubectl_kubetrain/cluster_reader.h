// ClusterReader: everything the plugin reads from the Kubernetes API, behind
// one small interface (KubeClusterReader is the real one; tests use a fake).
// Also the request paths the real one sends, as pure functions.
// Implementations are thread-safe: `logs -f` streams from several threads.
#ifndef KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_CLUSTER_READER_H_
#define KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_CLUSTER_READER_H_

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "operator/kube/http_transport.h"

namespace kubetrain::kubectl_plugin {

struct LogRequest {
  std::string container;
  bool follow = false;
  bool previous = false;
  bool timestamps = true;                    // the plugin merges and resumes by them
  std::optional<int64_t> since_unix_micros;  // sinceTime (whole seconds on the wire)
};

// /api/v1/namespaces/<ns>/pods/<pod>/log?container=..&follow=true&previous=true&...
std::string PodLogPath(absl::string_view ns, absl::string_view pod, const LogRequest& request);
// /api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy<path>: the port and path of
// the pod's prometheus.io/port and /path annotations, else api::kMetricsPort
// and /metrics.
std::string PodMetricsProxyPath(const nlohmann::json& pod);

class ClusterReader {
 public:
  virtual ~ClusterReader() = default;
  virtual absl::StatusOr<nlohmann::json> GetTrainingJob(const std::string& ns,
                                                        const std::string& name) = 0;
  // Every pod matching the label selector.
  virtual absl::StatusOr<std::vector<nlohmann::json>> ListPods(const std::string& ns,
                                                               const std::string& selector) = 0;
  virtual absl::StatusOr<std::vector<nlohmann::json>> ListEvents(const std::string& ns) = 0;
  // The whole log (without follow).
  virtual absl::StatusOr<std::string> ReadLog(const std::string& ns, const std::string& pod,
                                              const LogRequest& request) = 0;
  // The log as it comes (follow); the stream ends with the container.
  virtual absl::StatusOr<std::unique_ptr<kube::HttpStream>> StreamLog(
      const std::string& ns, const std::string& pod, const LogRequest& request) = 0;
  // The pod's runtime metrics page, through the API server's pod proxy.
  virtual absl::StatusOr<std::string> ReadMetrics(const std::string& ns,
                                                  const nlohmann::json& pod) = 0;
};

}  // namespace kubetrain::kubectl_plugin

#endif  // KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_CLUSTER_READER_H_
