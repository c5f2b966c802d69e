// EventRecorder: core/v1 Events on a TrainingJob, so `kubectl describe tj`
// tells the story (pods created and deleted, restarts, failures, success).
// Recording never fails the caller: errors are logged. Thread-safe.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_EVENT_RECORDER_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_EVENT_RECORDER_H_

#include <nlohmann/json.hpp>
#include <string>

#include "operator/kube/kube_client.h"
#include "operator/kube/logger.h"

namespace kubetrain::controller {

inline constexpr char kEventNormal[] = "Normal";
inline constexpr char kEventWarning[] = "Warning";

class EventRecorder {
 public:
  // Borrows client and logger.
  EventRecorder(kube::KubeClient& client, kube::Logger* logger,
                std::string component = "kubetrain-operator");
  // `object`: the involved object as read from the API.
  void Record(const nlohmann::json& object, const std::string& type, const std::string& reason,
              const std::string& message);

 private:
  kube::KubeClient& client_;
  kube::Logger* const logger_;
  const std::string component_;
};

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_EVENT_RECORDER_H_
