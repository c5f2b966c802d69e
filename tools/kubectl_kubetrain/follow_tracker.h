// FollowTracker: the decisions of `kubectl kubetrain logs -f`, from
// snapshots of the job's pods and the ends of the log streams it opened.
// Per replica it streams one container instance at a time:
//   - a replica seen for the first time, or under a new pod UID (the pod was
//     deleted and re-created), is opened once its container has started
//     (running or terminated), labelled with its restartCount;
//   - when the stream of restart r ends and the pod shows restartCount > r
//     with the new instance started, the new instance is opened;
//   - when a stream ends while the same instance still runs (the connection
//     dropped), it is reopened to resume after the last line read;
//   - a stream that could not be opened (the container is not ready to give
//     logs yet) or broke off is tried again on the next snapshot, also
//     when its instance has ended meanwhile.
// The follow is done once the job has finished and no stream is open.
//
// Pure: no I/O, no clock. Not thread-safe; the follower calls it from its
// one control thread.
#ifndef KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_FOLLOW_TRACKER_H_
#define KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_FOLLOW_TRACKER_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tools/kubectl_kubetrain/replica_ref.h"

namespace kubetrain::kubectl_plugin {

// A log stream to open.
struct StreamToOpen {
  ReplicaRef replica;
  std::string pod;
  std::string uid;
  std::string container;
  int restart = 0;
  // The same instance was streamed before and its stream dropped: read on
  // from where it stopped.
  bool resume = false;

  bool operator==(const StreamToOpen& other) const = default;
};

class FollowTracker {
 public:
  // `only`: follow that replica alone; nullopt: every replica.
  explicit FollowTracker(std::optional<ReplicaRef> only = std::nullopt);

  // The job's pods now; returns the streams to open (each is then open until
  // StreamEnded or OpenFailed names it).
  std::vector<StreamToOpen> Observe(const std::vector<PodView>& pods);
  // The stream opened for (uid, restart) ended: `complete` when its body
  // ended cleanly, false for a refusal to open or a broken connection.
  void StreamEnded(const std::string& uid, int restart, bool complete);

  bool Done(bool job_finished) const { return job_finished && open_.empty(); }
  int open_streams() const { return static_cast<int>(open_.size()); }

 private:
  struct Replica {
    std::string uid;
    int restart = 0;
  };

  const std::optional<ReplicaRef> only_;
  std::map<std::string, Replica> replicas_;           // by ReplicaName
  std::set<std::pair<std::string, int>> open_;        // (uid, restart)
  std::set<std::pair<std::string, int>> printed_;     // opened before: a reopen resumes
  std::set<std::pair<std::string, int>> incomplete_;  // ended without a clean end
};

}  // namespace kubetrain::kubectl_plugin

#endif  // KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_FOLLOW_TRACKER_H_
