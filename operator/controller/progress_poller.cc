#include "operator/controller/progress_poller.h"

#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "api/labels.h"
#include "api/metric_names.h"
#include "api/ports.h"
#include "api/training_job.h"
#include "operator/kube/object.h"

namespace kubetrain::controller {

using Json = nlohmann::json;

namespace {

constexpr char kComponent[] = "progress";
constexpr size_t kMaxBody = 16 << 20;
constexpr absl::Duration kMinInterval = absl::Milliseconds(10);

// --- libcurl fetcher ---

class CurlMetricsFetcher final : public MetricsFetcher {
 public:
  explicit CurlMetricsFetcher(absl::Duration timeout) : timeout_(timeout) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
  }
  ~CurlMetricsFetcher() override { curl_global_cleanup(); }

  absl::StatusOr<std::string> Fetch(const std::string& url) override {
    CURL* curl = curl_easy_init();
    if (curl == nullptr) return absl::InternalError("curl_easy_init failed");
    Body body;
    char error[CURL_ERROR_SIZE] = {0};
    const long timeout_ms = std::max<long>(1, absl::ToInt64Milliseconds(timeout_));
    curl_slist* headers = curl_slist_append(nullptr, "Accept: text/plain;version=0.0.4");
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    curl_easy_setopt(curl, CURLOPT_PROXY, "");  // pod IPs are never behind a proxy
    curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &CurlMetricsFetcher::Write);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
    const CURLcode code = curl_easy_perform(curl);
    long http_code = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http_code);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    if (body.too_large) {
      return absl::UnavailableError(
          absl::StrCat("GET ", url, ": body larger than ", kMaxBody, " bytes"));
    }
    if (code != CURLE_OK) {
      return absl::UnavailableError(
          absl::StrCat("GET ", url, ": ", error[0] != '\0' ? error : curl_easy_strerror(code)));
    }
    if (http_code < 200 || http_code >= 300) {
      return absl::UnavailableError(absl::StrCat("GET ", url, ": HTTP ", http_code));
    }
    return std::move(body.data);
  }

 private:
  struct Body {
    std::string data;
    bool too_large = false;
  };
  static size_t Write(char* ptr, size_t size, size_t n, void* user) {
    Body* body = static_cast<Body*>(user);
    const size_t bytes = size * n;
    if (body->data.size() + bytes > kMaxBody) {
      body->too_large = true;
      return 0;  // aborts the transfer
    }
    body->data.append(ptr, bytes);
    return bytes;
  }

  const absl::Duration timeout_;
};

// --- reading the page ---

std::optional<double> FindValue(const PrometheusExposition& page, const std::string& name,
                                const std::vector<std::pair<std::string, std::string>>& expected) {
  for (const PrometheusSample& sample : page.samples) {
    if (sample.name != name || !SampleMatches(sample, expected)) continue;
    if (!std::isfinite(sample.value)) return std::nullopt;
    return sample.value;
  }
  return std::nullopt;
}

std::optional<int64_t> AsCount(std::optional<double> value) {
  // Beyond ±2^63 a double no longer names an int64.
  if (!value || std::fabs(*value) >= 9.2e18) return std::nullopt;
  return static_cast<int64_t>(std::llround(*value));
}

// The job's status ({} when it has none or it does not read).
api::JobStatus StatusOf(const Json& job) {
  auto it = job.find("status");
  if (it == job.end()) return api::JobStatus{};
  absl::StatusOr<api::JobStatus> status = api::StatusFromJson(*it);
  return status.ok() ? *std::move(status) : api::JobStatus{};
}

// status.progress without updatedAt, as stored on the job ({} when none).
Json CurrentProgress(const Json& job) {
  std::optional<api::Progress> progress = StatusOf(job).progress;
  if (!progress) return Json::object();
  progress->updated_at.clear();
  return api::ProgressToJson(*progress);
}

}  // namespace

std::unique_ptr<MetricsFetcher> NewCurlMetricsFetcher(absl::Duration timeout) {
  return std::make_unique<CurlMetricsFetcher>(timeout);
}

bool IsJobRunning(const Json& job) {
  const api::JobStatus status = StatusOf(job);
  auto is_true = [&](const char* type) { return api::IsConditionTrue(status, type); };
  if (is_true(api::kCondSucceeded) || is_true(api::kCondFailed) || is_true(api::kCondSuspended)) {
    return false;
  }
  return is_true(api::kCondRunning) || is_true(api::kCondRestarting);
}

api::Progress ProgressFromMetrics(const PrometheusExposition& page, const Json& pod,
                                  const std::string& job_name) {
  const std::vector<std::pair<std::string, std::string>> expected =
      ReplicaMetricLabels(pod, job_name);
  api::Progress progress;
  progress.step = AsCount(FindValue(page, api::kMetricGlobalStep, expected));
  progress.total_steps = AsCount(FindValue(page, api::kMetricTotalSteps, expected));
  progress.loss = FindValue(page, api::kMetricTrainLoss, expected);
  progress.accuracy = FindValue(page, api::kMetricEvalAccuracy, expected);
  if (!progress.accuracy) progress.accuracy = FindValue(page, api::kMetricTrainAccuracy, expected);
  progress.samples_per_second = FindValue(page, api::kMetricSamplesPerSecond, expected);
  return progress;
}

std::string MetricsUrl(const Json& pod) {
  const std::string ip = kube::StringAt(pod, {"status", "podIP"});
  if (ip.empty()) return "";
  std::string port = kube::Annotation(pod, api::kPrometheusPortAnnotation);
  int port_number = 0;
  if (!absl::SimpleAtoi(port, &port_number) || port_number <= 0 || port_number > 65535) {
    port = api::kMetricsPortString;
  }
  std::string path = kube::Annotation(pod, api::kPrometheusPathAnnotation);
  if (path.empty()) path = api::kMetricsPath;
  if (path.front() != '/') path.insert(path.begin(), '/');
  // An IPv6 address goes in brackets.
  const std::string host = ip.find(':') != std::string::npos ? absl::StrCat("[", ip, "]") : ip;
  return absl::StrCat("http://", host, ":", port, path);
}

ProgressPoller::ProgressPoller(kube::KubeClient& client, const kube::ObjectCache& jobs,
                               const kube::ObjectCache& pods, MetricsFetcher& fetcher,
                               ProgressPollerOptions options, kube::Logger* logger)
    : client_(client),
      jobs_(jobs),
      pods_(pods),
      fetcher_(fetcher),
      options_(options),
      logger_(logger) {}

ProgressPoller::~ProgressPoller() { Stop(); }

void ProgressPoller::Start() {
  absl::MutexLock lifecycle(&lifecycle_mu_);
  if (thread_.joinable()) return;
  {
    absl::MutexLock lock(&run_mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { Run(); });
}

void ProgressPoller::Stop() {
  absl::MutexLock lifecycle(&lifecycle_mu_);
  if (!thread_.joinable()) return;
  {
    absl::MutexLock lock(&run_mu_);
    stopping_ = true;
  }
  thread_.join();
}

void ProgressPoller::Run() {
  const absl::Duration interval = std::max(options_.interval, kMinInterval);
  while (true) {
    PollOnce();
    absl::MutexLock lock(&run_mu_);
    run_mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval);
    if (stopping_) return;
  }
}

void ProgressPoller::Log(kube::LogLevel level, const std::string& message) {
  if (logger_ != nullptr && logger_->Enabled(level)) logger_->Log(level, kComponent, message);
}

std::optional<ProgressPoller::Target> ProgressPoller::TargetFor(const kube::ObjectPtr& job) const {
  if (!IsJobRunning(*job) || kube::IsBeingDeleted(*job)) return std::nullopt;
  const std::string uid = kube::Uid(*job);
  if (uid.empty()) return std::nullopt;
  for (const kube::ObjectPtr& pod : pods_.ByIndex(kube::kIndexOwnerUid, uid)) {
    if (kube::Label(*pod, api::kLabelJobRole) != api::kJobRoleChief) continue;
    if (kube::ControllerUid(*pod) != uid) continue;
    if (kube::IsBeingDeleted(*pod)) continue;
    if (kube::StringAt(*pod, {"status", "phase"}) != "Running") continue;
    if (kube::StringAt(*pod, {"status", "podIP"}).empty()) continue;
    return Target{kube::ObjectKey(*job), uid, *job, *pod};
  }
  return std::nullopt;
}

int ProgressPoller::PollOnce() {
  std::vector<Target> targets;
  std::vector<kube::ObjectPtr> watched;  // jobs whose stalls are watched
  absl::flat_hash_map<std::string, bool> live_uids;
  absl::flat_hash_map<std::string, bool> watched_uids;
  for (const kube::ObjectPtr& job : jobs_.List()) {
    live_uids[kube::Uid(*job)] = true;
    if (std::optional<Target> target = TargetFor(job)) targets.push_back(*std::move(target));
    if (options_.stalls != nullptr && IsJobRunning(*job) && !kube::IsBeingDeleted(*job) &&
        kube::IntAt(*job, {"spec", "runPolicy", "stallTimeoutSeconds"},
                    api::kDefaultStallTimeoutSeconds) > 0) {
      watched.push_back(job);
      watched_uids[kube::Uid(*job)] = true;
    }
  }
  {
    // Forget jobs that are gone.
    absl::MutexLock lock(&mu_);
    absl::erase_if(failing_, [&](const auto& e) { return !live_uids.contains(e.first); });
    absl::erase_if(written_, [&](const auto& e) { return !live_uids.contains(e.first); });
    absl::erase_if(members_, [&](const auto& e) { return !live_uids.contains(e.first); });
    // And stop watching those that finished, or whose watch was turned off.
    absl::erase_if(stalled_, [&](const auto& e) {
      if (watched_uids.contains(e.first)) return false;
      if (options_.stalls != nullptr) options_.stalls->Forget(e.first);
      return true;
    });
  }
  const size_t tasks = targets.size() + watched.size();
  if (tasks == 0) return 0;

  std::atomic<size_t> next{0};
  std::atomic<int> written{0};
  auto work = [&] {
    for (size_t i = next++; i < tasks; i = next++) {
      // A metrics page or object shaped in a way nobody foresaw must not
      // end the operator: log it and go on with the next job.
      try {
        if (i < targets.size()) {
          if (PollJob(targets[i])) ++written;
        } else {
          WatchJob(watched[i - targets.size()]);
        }
      } catch (const std::exception& e) {
        Log(kube::LogLevel::kWarning,
            absl::StrCat(
                "progress of ",
                i < targets.size() ? targets[i].key : kube::ObjectKey(*watched[i - targets.size()]),
                ": exception: ", e.what()));
      }
    }
  };
  const size_t threads = std::min(tasks, static_cast<size_t>(std::max(1, options_.max_parallel)));
  std::vector<std::thread> pool;
  for (size_t i = 1; i < threads; ++i) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return written.load();
}

void ProgressPoller::WatchJob(const kube::ObjectPtr& job) {
  const std::string uid = kube::Uid(*job);
  const std::string job_name = kube::Name(*job);
  std::vector<ReplicaReading> readings;
  for (const kube::ObjectPtr& pod : pods_.ByIndex(kube::kIndexOwnerUid, uid)) {
    if (kube::ControllerUid(*pod) != uid || kube::IsBeingDeleted(*pod)) continue;
    if (kube::StringAt(*pod, {"status", "phase"}) != "Running") continue;
    const std::string type = kube::Label(*pod, api::kLabelReplicaType);
    if (type != "worker" && type != "chief" && type != "ps") continue;
    ReplicaReading r;
    r.replica = absl::StrCat(type, "-", kube::Label(*pod, api::kLabelReplicaIndex));
    r.pod = kube::Name(*pod);
    r.node = kube::StringAt(*pod, {"spec", "nodeName"});
    r.trains = type != "ps";
    const std::string url = MetricsUrl(*pod);
    absl::StatusOr<std::string> body =
        url.empty() ? absl::StatusOr<std::string>(absl::UnavailableError("no pod IP"))
                    : fetcher_.Fetch(url);
    if (body.ok()) {
      absl::StatusOr<PrometheusExposition> page = ParsePrometheusText(*body);
      if (page.ok()) {
        r.step = ProgressFromMetrics(*page, *pod, job_name).step;
        r.waiting_seconds =
            FindValue(*page, api::kMetricAllreduceStallSeconds, ReplicaMetricLabels(*pod, job_name))
                .value_or(0.0);
        // A replica that answers but has no step yet (loading data) counts
        // as at step 0.
        if (!r.step) r.step = 0;
      }
    }
    readings.push_back(std::move(r));
  }
  const double now =
      options_.clock != nullptr ? options_.clock->NowSeconds() : RealClock().NowSeconds();
  options_.stalls->Observe(uid, readings, now);
  const double timeout = static_cast<double>(kube::IntAt(
      *job, {"spec", "runPolicy", "stallTimeoutSeconds"}, api::kDefaultStallTimeoutSeconds));
  const bool stalled = options_.stalls->Check(uid, timeout, now).has_value();
  bool changed = false;
  {
    absl::MutexLock lock(&mu_);
    auto [it, fresh] = stalled_.try_emplace(uid, false);
    changed = it->second != stalled;
    it->second = stalled;
  }
  if (changed && options_.on_stall_change) options_.on_stall_change(kube::ObjectKey(*job));
}

bool ProgressPoller::PollJob(const Target& target) {
  const std::string url = MetricsUrl(target.pod);
  absl::StatusOr<std::string> body = fetcher_.Fetch(url);
  if (!body.ok()) {
    NoteFailure(target, body.status());
    return false;
  }
  absl::StatusOr<PrometheusExposition> page = ParsePrometheusText(*body);
  if (!page.ok()) {
    NoteFailure(target, absl::Status(page.status().code(),
                                     absl::StrCat(url, ": ", page.status().message())));
    return false;
  }
  const api::Progress read = ProgressFromMetrics(*page, target.pod, kube::Name(target.job));
  const Json desired_progress = api::ProgressToJson(read);
  const Json current = CurrentProgress(target.job);
  const api::JobStatus stored = StatusOf(target.job);
  const WorldReading world = WorldFromMetrics(*page, target.pod, kube::Name(target.job));
  // The world's fields are written when the runtime reports them and they
  // changed; a page without them leaves the stored ones.
  const bool new_size = world.size && world.size != stored.world_size;
  const bool new_generation = world.generation && world.generation != stored.generation;
  if (desired_progress == current && !new_size && !new_generation) {
    RememberMembers(target.uid, world);
    NoteSuccess(target);
    return false;
  }
  Json desired = {{"progress", desired_progress}};
  if (new_size) desired["worldSize"] = *world.size;
  if (new_generation) desired["generation"] = *world.generation;
  const std::string cached_version = kube::ResourceVersionOf(target.job);
  Json last_written = Json::object();
  {
    absl::MutexLock lock(&mu_);
    auto it = written_.find(target.uid);
    // Ours is written but the cache has not caught up yet.
    if (it != written_.end() && it->second.first == cached_version &&
        it->second.second == desired) {
      NoteSuccessLocked(target);
      return false;
    }
    if (it != written_.end() && it->second.second.is_object()) last_written = it->second.second;
  }

  Json progress = desired_progress;
  const Json last_progress = last_written.value("progress", Json::object());
  // A metric that disappeared removes its field (null deletes in a merge
  // patch): fields of the cached progress and of our last write, which the
  // cache may not show yet.
  for (const Json* previous : {&current, &last_progress}) {
    if (!previous->is_object()) continue;
    for (const auto& [field, value] : previous->items()) {
      if (!progress.contains(field)) progress[field] = nullptr;
    }
  }
  progress["updatedAt"] = kube::FormatTime(absl::ToUnixMicros(absl::Now()));
  Json patch{{"status", {{"progress", progress}}}};
  if (new_size) patch["status"]["worldSize"] = *world.size;
  if (new_generation) patch["status"]["generation"] = *world.generation;
  absl::StatusOr<Json> result = client_.MergePatch(kube::kTrainingJobs, kube::Namespace(target.job),
                                                   kube::Name(target.job), patch, "status");
  if (!result.ok()) {
    NoteFailure(target,
                absl::Status(result.status().code(),
                             absl::StrCat("writing status.progress: ", result.status().message())));
    return false;
  }
  std::optional<std::set<std::string>> previous;
  {
    absl::MutexLock lock(&mu_);
    written_[target.uid] = {cached_version, desired};
    NoteSuccessLocked(target);
    if (auto it = members_.find(target.uid); it != members_.end()) previous = it->second;
  }
  RememberMembers(target.uid, world);
  if (new_generation && options_.on_membership_change) {
    const MembershipChange change = DiffMembership(
        *world.generation, read.step, world.size.value_or(stored.world_size.value_or(0)),
        previous ? &*previous : nullptr, world.members);
    options_.on_membership_change(target.job, change);
  }
  return true;
}

void ProgressPoller::RememberMembers(const std::string& uid, const WorldReading& world) {
  if (world.members.empty()) return;
  absl::MutexLock lock(&mu_);
  members_[uid] = world.members;
}

void ProgressPoller::NoteFailure(const Target& target, const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    bool& failing = failing_[target.uid];
    if (failing) return;
    failing = true;
  }
  Log(kube::LogLevel::kWarning,
      absl::StrCat(
          target.key, ": cannot update progress from chief pod ", kube::Name(target.pod),
          " (keeping the last one; warning once until it works again): ", status.ToString()));
}

void ProgressPoller::NoteSuccess(const Target& target) {
  absl::MutexLock lock(&mu_);
  NoteSuccessLocked(target);
}

void ProgressPoller::NoteSuccessLocked(const Target& target) {
  auto it = failing_.find(target.uid);
  if (it == failing_.end() || !it->second) return;
  failing_.erase(it);
  Log(kube::LogLevel::kInfo,
      absl::StrCat(target.key, ": progress from chief pod ", kube::Name(target.pod), " is back"));
}

}  // namespace kubetrain::controller
