#include "tools/kubectl_kubetrain/log_follower.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tools/kubectl_kubetrain/job_state.h"
#include "tools/kubectl_kubetrain/log_lines.h"

namespace kubetrain::kubectl_plugin {

LogFollower::LogFollower(ClusterReader& api, LineWriter& out, std::ostream& err,
                         FollowOptions options)
    : api_(api), out_(out), err_(err), options_(std::move(options)), tracker_(options_.only) {}

LogFollower::~LogFollower() {
  Stop();
  for (std::thread& t : threads_) t.join();
}

void LogFollower::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  CancelAll();
}

void LogFollower::CancelAll() {
  for (auto& [key, stream] : open_) stream->Cancel();
}

void LogFollower::Warn(const std::string& message) {
  absl::MutexLock lock(&err_mu_);
  err_ << "kubectl-kubetrain: " << message << "\n";
  err_.flush();
}

absl::Status LogFollower::Run() {
  std::optional<absl::Time> drain_deadline;
  bool first = true;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
    }
    absl::StatusOr<nlohmann::json> job = api_.GetTrainingJob(options_.ns, options_.job);
    bool finished = false;
    if (!job.ok()) {
      if (absl::IsNotFound(job.status())) {
        if (first) return job.status();
        Warn(absl::StrCat("trainingjob ", options_.job, " was deleted"));
        finished = true;
      } else {
        Warn(std::string(job.status().message()));
      }
    } else {
      finished = JobFinished(*job);
    }
    first = false;

    std::vector<PodView> views;
    absl::StatusOr<std::vector<nlohmann::json>> pods =
        api_.ListPods(options_.ns, JobPodSelector(options_.job));
    if (pods.ok()) {
      for (const nlohmann::json& pod : *pods) {
        if (std::optional<PodView> view = ViewOfPod(pod, options_.container)) {
          views.push_back(std::move(*view));
        }
      }
    } else {
      Warn(std::string(pods.status().message()));
    }
    {
      absl::MutexLock lock(&mu_);
      for (const Ended& e : ended_) tracker_.StreamEnded(e.key.first, e.key.second, e.complete);
      ended_.clear();
    }
    if (pods.ok()) {
      for (const StreamToOpen& stream : tracker_.Observe(views)) Open(stream);
    }
    {
      absl::MutexLock lock(&mu_);
      for (const Ended& e : ended_) tracker_.StreamEnded(e.key.first, e.key.second, e.complete);
      ended_.clear();
    }
    if (tracker_.Done(finished)) break;
    absl::MutexLock lock(&mu_);
    if (finished) {
      const absl::Time now = absl::Now();
      if (!drain_deadline) drain_deadline = now + options_.drain_timeout;
      if (now >= *drain_deadline) CancelAll();
    }
    // Until the next poll, or at once when a stream ends or Stop() is called.
    auto woken = [this]()
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !ended_.empty(); };
    mu_.AwaitWithTimeout(absl::Condition(&woken), options_.poll_interval);
  }
  {
    absl::MutexLock lock(&mu_);
    CancelAll();
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  return absl::OkStatus();
}

void LogFollower::Open(const StreamToOpen& stream) {
  const Key key{stream.uid, stream.restart};
  LogRequest request;
  request.container = stream.container;
  request.follow = true;
  std::optional<int64_t> skip_through;
  int64_t skip_lines = 0;
  {
    absl::MutexLock lock(&mu_);
    request.timestamps = timestamps_;
    if (stream.resume) {
      auto it = last_time_.find(key);
      if (request.timestamps && it != last_time_.end()) {
        skip_through = it->second;
        request.since_unix_micros = it->second;
      } else if (!request.timestamps) {
        skip_lines = printed_[key];
      }
    }
  }
  absl::StatusOr<std::unique_ptr<kube::HttpStream>> body =
      api_.StreamLog(options_.ns, stream.pod, request);
  if (!body.ok() && absl::IsInvalidArgument(body.status()) && request.timestamps) {
    // A 400: a container not started yet, or a log server without per-line
    // times. Asked again without them: if that works it was the latter, and
    // from now on every stream is read without them, from its run's start.
    LogRequest plain = request;
    plain.timestamps = false;
    plain.since_unix_micros.reset();
    absl::StatusOr<std::unique_ptr<kube::HttpStream>> retry =
        api_.StreamLog(options_.ns, stream.pod, plain);
    if (retry.ok()) {
      absl::MutexLock lock(&mu_);
      timestamps_ = false;
      skip_lines = printed_[key];
      skip_through.reset();
    }
    body = std::move(retry);  // either way the second answer is the one to report
  }
  absl::MutexLock lock(&mu_);
  if (!body.ok() || stopping_) {
    if (!body.ok() && !warned_[key]) {
      warned_[key] = true;
      Warn(absl::StrCat(ReplicaName(stream.replica), " (pod ", stream.pod,
                        "): ", body.status().message(), "; trying again"));
    }
    ended_.push_back(Ended{key, false});
    return;
  }
  open_[key] = body->get();
  threads_.emplace_back(&LogFollower::Read, this, stream, *std::move(body), skip_through,
                        skip_lines);
}

void LogFollower::Read(StreamToOpen stream, std::unique_ptr<kube::HttpStream> body,
                       std::optional<int64_t> skip_through, int64_t skip_lines) {
  const Key key{stream.uid, stream.restart};
  const std::string prefix = LogPrefix(stream.replica, stream.restart);
  std::string line;
  bool complete = false;
  std::optional<int64_t> last;
  while (true) {
    absl::StatusOr<bool> got = body->ReadLine(&line);
    if (!got.ok()) break;
    if (!*got) {
      complete = true;
      break;
    }
    if (skip_lines > 0) {  // printed before the stream broke off (no timestamps)
      --skip_lines;
      continue;
    }
    TimedLine timed = SplitTimestamp(line);
    if (timed.unix_micros) {
      if (skip_through && *timed.unix_micros <= *skip_through) continue;
      last = timed.unix_micros;
    }
    out_.Write(prefix, timed.text);
    absl::MutexLock lock(&mu_);
    ++printed_[key];
    if (last) last_time_[key] = *last;
  }
  absl::MutexLock lock(&mu_);
  open_.erase(key);
  ended_.push_back(Ended{key, complete});
  // `body` is destroyed after the lock: no Cancel() can reach it any more.
}

}  // namespace kubetrain::kubectl_plugin
