#include "tools/kubectl_kubetrain/follow_tracker.h"

namespace kubetrain::kubectl_plugin {

FollowTracker::FollowTracker(std::optional<ReplicaRef> only) : only_(std::move(only)) {}

std::vector<StreamToOpen> FollowTracker::Observe(const std::vector<PodView>& pods) {
  std::vector<StreamToOpen> out;
  for (const PodView& pod : pods) {
    if (only_ && !(pod.replica == *only_)) continue;
    if (pod.uid.empty()) continue;
    const bool started = pod.running || pod.terminated;
    Replica& replica = replicas_[ReplicaName(pod.replica)];
    std::optional<int> restart;
    if (replica.uid != pod.uid) {
      // New, or re-created under the same name: a stream of the old pod
      // may still be draining; it ends on its own when that pod goes.
      if (started) {
        replica = Replica{pod.uid, pod.restarts};
        restart = pod.restarts;
      }
    } else if (open_.count({pod.uid, replica.restart}) == 0) {
      if (pod.restarts > replica.restart && started) {
        restart = pod.restarts;  // the container restarted
      } else if (pod.restarts == replica.restart &&
                 (pod.running ||
                  (pod.terminated && incomplete_.count({pod.uid, pod.restarts}) > 0))) {
        restart = pod.restarts;  // refused before, or dropped
      }
    }
    if (!restart) continue;
    replica.restart = *restart;
    const std::pair<std::string, int> key{pod.uid, *restart};
    out.push_back(StreamToOpen{pod.replica, pod.pod, pod.uid, pod.container, *restart,
                               printed_.count(key) > 0});
    open_.insert(key);
    printed_.insert(key);
  }
  return out;
}

void FollowTracker::StreamEnded(const std::string& uid, int restart, bool complete) {
  open_.erase({uid, restart});
  if (complete) {
    incomplete_.erase({uid, restart});
  } else {
    incomplete_.insert({uid, restart});
  }
}

}  // namespace kubetrain::kubectl_plugin
