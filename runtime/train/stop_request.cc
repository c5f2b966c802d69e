#include "runtime/train/stop_request.h"

namespace kubetrain::train {

bool StopRequest::Request(const std::string& cause) {
  absl::MutexLock l(&mu_);
  if (!requested_) cause_ = cause;
  requested_ = true;
  return training_;
}

void StopRequest::BeginTraining() {
  absl::MutexLock l(&mu_);
  training_ = true;
}

void StopRequest::EndTraining() {
  absl::MutexLock l(&mu_);
  training_ = false;
}

bool StopRequest::requested() const {
  absl::MutexLock l(&mu_);
  return requested_;
}

std::string StopRequest::cause() const {
  absl::MutexLock l(&mu_);
  return cause_;
}

}  // namespace kubetrain::train
