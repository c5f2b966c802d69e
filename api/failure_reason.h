// Why a replica failed, in the words status.lastFailure, the Failed and
// Restarting conditions, Events and the operator's metrics use: the
// contract between the operator, which classifies a pod's end, and the
// people and tools that read a TrainingJob's status. Header-only; pure.
//
//   OOMKilled                   the container ran out of its memory limit
//   Evicted                     the kubelet or the eviction API took the pod away
//   Preempted                   the scheduler made room for a higher priority
//   NodeLost                    the pod's node stopped answering or was removed
//   LostPeer                    the runtime lost a peer (exit 129), retryable
//   DeadlineExceeded            the pod's activeDeadlineSeconds passed
//   ConfigError                 the runtime refused its configuration or data
//                               (exit 1-127 with a "kubetrain: error:" line)
//   ImagePullBackOff            the image cannot be pulled
//   CreateContainerConfigError  a Secret or ConfigMap the container needs is missing
//   Error                       anything else
// Evicted, Preempted and NodeLost are disruptions: the replica did nothing
// wrong, so they do not count toward runPolicy.backoffLimit (as batch/v1's
// podFailurePolicy with DisruptionTarget: Ignore), up to
// runPolicy.maxDisruptions.
#ifndef KUBETRAIN_API_FAILURE_REASON_H_
#define KUBETRAIN_API_FAILURE_REASON_H_

#include <string>

namespace kubetrain::api {

enum class FailureReason {
  kError,
  kOomKilled,
  kEvicted,
  kPreempted,
  kNodeLost,
  kLostPeer,
  kDeadlineExceeded,
  kConfigError,
  kImagePullBackOff,
  kCreateContainerConfigError,
};

inline std::string FailureReasonName(FailureReason r) {
  switch (r) {
    case FailureReason::kOomKilled:
      return "OOMKilled";
    case FailureReason::kEvicted:
      return "Evicted";
    case FailureReason::kPreempted:
      return "Preempted";
    case FailureReason::kNodeLost:
      return "NodeLost";
    case FailureReason::kLostPeer:
      return "LostPeer";
    case FailureReason::kDeadlineExceeded:
      return "DeadlineExceeded";
    case FailureReason::kConfigError:
      return "ConfigError";
    case FailureReason::kImagePullBackOff:
      return "ImagePullBackOff";
    case FailureReason::kCreateContainerConfigError:
      return "CreateContainerConfigError";
    case FailureReason::kError:
      break;
  }
  return "Error";
}

inline bool IsDisruption(FailureReason r) {
  return r == FailureReason::kEvicted || r == FailureReason::kPreempted ||
         r == FailureReason::kNodeLost;
}

// The line a runtime's permanent error starts with (its stderr and its
// termination message), which makes an exit of 1-127 a ConfigError.
inline constexpr char kRuntimeErrorPrefix[] = "kubetrain: error:";

}  // namespace kubetrain::api

#endif  // KUBETRAIN_API_FAILURE_REASON_H_
