// StopRequest: a signal watcher's request (SIGTERM: a deleted pod, a
// preemption, a suspended job; SIGINT: Ctrl-C) that training stop at the
// next step boundary, or when the step in flight fails, and checkpoint the
// parameters of the last completed step (Trainer, TrainerOptions::stop).
// The trainer says when it is in its loop, so the watcher knows whether
// anyone will honour the request or it must end the process itself.
// Thread-safe.
#ifndef KUBETRAIN_RUNTIME_TRAIN_STOP_REQUEST_H_
#define KUBETRAIN_RUNTIME_TRAIN_STOP_REQUEST_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace kubetrain::train {

class StopRequest {
 public:
  StopRequest() = default;
  StopRequest(const StopRequest&) = delete;
  StopRequest& operator=(const StopRequest&) = delete;

  // The watcher: stop, because of `cause` ("SIGTERM"). Returns whether a
  // training loop is running and will stop at its next boundary (between
  // BeginTraining and EndTraining); false: nobody will, the caller ends the
  // process. Only the first request's cause is kept.
  bool Request(const std::string& cause) ABSL_LOCKS_EXCLUDED(mu_);

  // The trainer: its loop begins (requests are honoured from now on) or
  // has ended (they are not any more).
  void BeginTraining() ABSL_LOCKS_EXCLUDED(mu_);
  void EndTraining() ABSL_LOCKS_EXCLUDED(mu_);

  bool requested() const ABSL_LOCKS_EXCLUDED(mu_);
  // The first request's cause; "" before one.
  std::string cause() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  bool requested_ ABSL_GUARDED_BY(mu_) = false;
  bool training_ ABSL_GUARDED_BY(mu_) = false;
  std::string cause_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kubetrain::train

#endif  // KUBETRAIN_RUNTIME_TRAIN_STOP_REQUEST_H_
