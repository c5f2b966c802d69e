// EventRecorder: core/v1 Events on a TrainingJob, so `kubectl describe tj`
// tells the story (pods created and deleted, restarts, failures, success).
// As client-go's broadcaster, recording never waits for the API: Record()
// queues the event and a sender thread of its own posts it, so a reconcile
// pass does not pay an event's round trip; at most `max_pending` events wait
// (more are dropped, counted and logged), and the ones still waiting when the
// recorder is destroyed are dropped. Errors are logged, never returned.
// Thread-safe.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_EVENT_RECORDER_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_EVENT_RECORDER_H_

#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/logger.h"

namespace kubetrain::controller {

inline constexpr char kEventNormal[] = "Normal";
inline constexpr char kEventWarning[] = "Warning";

class EventRecorder {
 public:
  // Borrows client, clock (event timestamps) and logger.
  EventRecorder(kube::KubeClient& client, const Clock& clock, kube::Logger* logger,
                std::string component = "kubetrain-operator", size_t max_pending = 5000);
  // Stops the sender; events not yet posted are dropped.
  ~EventRecorder();
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // `object`: the involved object as read from the API. Returns at once.
  void Record(const nlohmann::json& object, const std::string& type, const std::string& reason,
              const std::string& message);
  // Blocks until every queued event has been posted (or failed), or
  // `timeout` passes; false on timeout. For tests and orderly shutdown.
  bool Flush(absl::Duration timeout);
  int64_t dropped() const;

 private:
  struct Pending {
    std::string ns;
    std::string what;  // "<reason> on <ns/name>", for logs
    nlohmann::json event;
  };
  void Send();

  kube::KubeClient& client_;
  const Clock& clock_;
  kube::Logger* const logger_;
  const std::string component_;
  const size_t max_pending_;
  mutable absl::Mutex mu_;
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  bool sending_ ABSL_GUARDED_BY(mu_) = false;  // one taken off the queue, not yet posted
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread sender_;
};

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_EVENT_RECORDER_H_
