// KubeClusterReader: ClusterReader over the project's KubeClient (REST with
// retries and typed errors; pods/log streamed with StreamText). Thread-safe.
#ifndef KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_KUBE_CLUSTER_READER_H_
#define KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_KUBE_CLUSTER_READER_H_

#include "absl/time/time.h"
#include "operator/kube/kube_client.h"
#include "tools/kubectl_kubetrain/cluster_reader.h"

namespace kubetrain::kubectl_plugin {

class KubeClusterReader final : public ClusterReader {
 public:
  // Borrows both clients: `metrics_client` reads the pods' metrics pages
  // (a short timeout and no retries suit a replica that may not answer). A
  // followed log that stays silent for `log_idle_timeout` breaks off (and
  // is reopened by the follower where it stopped).
  KubeClusterReader(kube::KubeClient& client, kube::KubeClient& metrics_client,
                    absl::Duration log_idle_timeout = absl::Hours(1))
      : client_(client), metrics_client_(metrics_client), log_idle_timeout_(log_idle_timeout) {}

  absl::StatusOr<nlohmann::json> GetTrainingJob(const std::string& ns,
                                                const std::string& name) override;
  absl::StatusOr<std::vector<nlohmann::json>> ListPods(const std::string& ns,
                                                       const std::string& selector) override;
  absl::StatusOr<std::vector<nlohmann::json>> ListEvents(const std::string& ns) override;
  absl::StatusOr<std::string> ReadLog(const std::string& ns, const std::string& pod,
                                      const LogRequest& request) override;
  absl::StatusOr<std::unique_ptr<kube::HttpStream>> StreamLog(const std::string& ns,
                                                              const std::string& pod,
                                                              const LogRequest& request) override;
  absl::StatusOr<std::string> ReadMetrics(const std::string& ns,
                                          const nlohmann::json& pod) override;

 private:
  kube::KubeClient& client_;
  kube::KubeClient& metrics_client_;
  const absl::Duration log_idle_timeout_;
};

}  // namespace kubetrain::kubectl_plugin

#endif  // KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_KUBE_CLUSTER_READER_H_
