// LogFollower: `kubectl kubetrain logs -f`. A control thread lists the
// job's pods (label selector) and reads the job every poll interval, or at
// once when a stream ends, and lets FollowTracker decide which streams to
// open; each open stream (pods/log?follow=true&timestamps=true) is read by a
// thread of its own that writes its lines, prefixed "[worker-3 r2] " and
// without the timestamps, through one LineWriter. A stream that broke off is
// reopened with sinceTime at its last line, and lines up to that line's
// time are skipped, so nothing is printed twice. A log server that refuses
// timestamps (400 BadRequest: kubetrain-node-agent keeps no per-line times)
// is asked without them from then on; a reopened stream then starts at the
// run's beginning and the lines already printed are skipped by count.
//
// Run() returns once the job has Succeeded or Failed and every stream has
// ended (streams of replicas still running `drain_timeout` after the job
// finished, such as parameter servers kept by cleanPodPolicy None, are cut
// then), when the job is deleted, or after Stop().
//
// Thread-safe: Stop() may be called from any thread (a signal handler's).
#ifndef KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_LOG_FOLLOWER_H_
#define KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_LOG_FOLLOWER_H_

#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tools/kubectl_kubetrain/cluster_reader.h"
#include "tools/kubectl_kubetrain/follow_tracker.h"
#include "tools/kubectl_kubetrain/line_writer.h"

namespace kubetrain::kubectl_plugin {

struct FollowOptions {
  std::string ns;
  std::string job;
  std::string container;           // "" = each pod's first container
  std::optional<ReplicaRef> only;  // --replica
  absl::Duration poll_interval = absl::Seconds(1);
  absl::Duration drain_timeout = absl::Seconds(10);
};

class LogFollower {
 public:
  // Borrows `api`, `out` and `err` (warnings: a stream that cannot be
  // opened yet, a failed list).
  LogFollower(ClusterReader& api, LineWriter& out, std::ostream& err, FollowOptions options);
  ~LogFollower();  // Stop(), then joins the stream threads
  LogFollower(const LogFollower&) = delete;
  LogFollower& operator=(const LogFollower&) = delete;

  // Follows until done (see above). NotFound when the job does not exist at
  // the start; OK otherwise.
  absl::Status Run();
  void Stop();

 private:
  using Key = std::pair<std::string, int>;  // (pod uid, restart)
  struct Ended {
    Key key;
    bool complete;
  };

  void Open(const StreamToOpen& stream);
  void Read(StreamToOpen stream, std::unique_ptr<kube::HttpStream> body,
            std::optional<int64_t> skip_through, int64_t skip_lines);
  void CancelAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Warn(const std::string& message);

  ClusterReader& api_;
  LineWriter& out_;
  std::ostream& err_;
  const FollowOptions options_;
  FollowTracker tracker_;  // control thread only

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Ended> ended_ ABSL_GUARDED_BY(mu_);
  std::map<Key, kube::HttpStream*> open_ ABSL_GUARDED_BY(mu_);
  std::map<Key, int64_t> last_time_ ABSL_GUARDED_BY(mu_);  // last line read, unix micros
  std::map<Key, bool> warned_ ABSL_GUARDED_BY(mu_);        // a refused open was reported
  std::map<Key, int64_t> printed_ ABSL_GUARDED_BY(mu_);    // lines written per stream
  bool timestamps_ ABSL_GUARDED_BY(mu_) = true;            // false once the server refused them
  std::vector<std::thread> threads_;                       // control thread only
  absl::Mutex err_mu_;
};

}  // namespace kubetrain::kubectl_plugin

#endif  // KUBETRAIN_TOOLS_KUBECTL_KUBETRAIN_LOG_FOLLOWER_H_
