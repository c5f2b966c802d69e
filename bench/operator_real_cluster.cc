#include "bench/operator_real_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "api/training_job.h"
#include "base/clock.h"
#include "bench/create_all.h"
#include "bench/recording_metrics.h"
#include "operator/controller/operator_metrics.h"
#include "operator/controller/prometheus_text.h"
#include "operator/controller/training_job_controller.h"
#include "operator/kube/api_error.h"
#include "operator/kube/cpprest_transport.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/logger.h"
#include "operator/kube/object.h"
#include "operator/kube/resource.h"
#include "operator/kube/work_queue.h"
#include "testing/kube_test_target.h"

namespace kubetrain::bench {
namespace {

using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

constexpr kube::ResourceType kJobs{"batch", "v1", "jobs", "Job"};
constexpr kube::ResourceType kServiceAccounts{"", "v1", "serviceaccounts", "ServiceAccount"};

double Since(SteadyClock::time_point a) {
  return std::chrono::duration<double>(SteadyClock::now() - a).count();
}

double Mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

double VmHwmMiB(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  }
  return 0;
}

// Counts the requests that reach the server, by "METHOD resource[/sub]"
// ("GET pods" is a list, "GET pods/name" a get, "WATCH pods" a watch).
class CountingTransport final : public kube::HttpTransport {
 public:
  explicit CountingTransport(std::unique_ptr<kube::HttpTransport> inner)
      : inner_(std::move(inner)) {}
  absl::StatusOr<kube::HttpResponse> Send(const kube::HttpRequest& request) override {
    const std::string what = Count(request.method, request.target);
    absl::StatusOr<kube::HttpResponse> response = inner_->Send(request);
    // Answers other than 2xx, by request ("POST pods -> 409"): retries and
    // AlreadyExists show here.
    if (!response.ok() || response->status / 100 != 2) {
      absl::MutexLock lock(&mu_);
      ++answers_[absl::StrCat(
          what, " -> ", response.ok() ? absl::StrCat(response->status) : std::string("no answer"))];
    }
    return response;
  }
  std::map<std::string, int64_t> Answers() const {
    absl::MutexLock lock(&mu_);
    return answers_;
  }
  absl::StatusOr<kube::StreamResponse> OpenStream(const kube::HttpRequest& request,
                                                  absl::Duration idle_timeout) override {
    Count("WATCH", request.target);
    return inner_->OpenStream(request, idle_timeout);
  }
  std::string Server() const override { return inner_->Server(); }

  std::map<std::string, int64_t> Counts() const {
    absl::MutexLock lock(&mu_);
    return counts_;
  }

 private:
  std::string Count(const std::string& method, const std::string& target) {
    std::vector<std::string> parts =
        absl::StrSplit(std::string(target.substr(0, target.find('?'))), '/', absl::SkipEmpty());
    std::string what;
    auto ns = std::find(parts.begin(), parts.end(), "namespaces");
    if (ns != parts.end() && std::distance(ns, parts.end()) >= 3) {
      const size_t i = static_cast<size_t>(std::distance(parts.begin(), ns)) + 2;
      what = parts[i];
      if (i + 2 < parts.size()) absl::StrAppend(&what, "/", parts[i + 2]);  // subresource
      if (method == "GET" && i + 1 < parts.size()) absl::StrAppend(&what, " (get)");
    } else {
      what = parts.empty() ? "/" : parts.back();
    }
    std::string key = absl::StrCat(method, " ", what);
    absl::MutexLock lock(&mu_);
    ++counts_[key];
    return key;
  }

  const std::unique_ptr<kube::HttpTransport> inner_;
  mutable absl::Mutex mu_;
  std::map<std::string, int64_t> counts_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> answers_ ABSL_GUARDED_BY(mu_);
};

class QueueLatencies final : public kube::WorkQueueObserver {
 public:
  void OnLatency(absl::Duration queued_for) override {
    absl::MutexLock lock(&mu_);
    seconds_.push_back(absl::ToDoubleSeconds(queued_for));
  }
  std::vector<double> Seconds() const {
    absl::MutexLock lock(&mu_);
    return seconds_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<double> seconds_ ABSL_GUARDED_BY(mu_);
};

// How long the passes' requests waited for a runner thread and took.
class PlanTimes final : public controller::ActionObserver {
 public:
  void OnSubmit() override { ++submitted_; }
  // Every plan submitted so far has finished.
  bool Idle() const {
    absl::MutexLock lock(&mu_);
    return submitted_.load() == static_cast<int64_t>(ran_.size());
  }
  void OnPlan(absl::Duration waited, absl::Duration ran, bool error) override {
    absl::MutexLock lock(&mu_);
    waited_.push_back(absl::ToDoubleSeconds(waited));
    ran_.push_back(absl::ToDoubleSeconds(ran));
    if (error) ++errors_;
  }
  void Print() const {
    absl::MutexLock lock(&mu_);
    if (ran_.empty()) return;
    std::printf(
        "  passes' requests (action runner): %zu plans (%d failed); waited for a thread mean "
        "%.2f ms, p99 %.2f ms; ran mean %.2f ms, p50 %.2f ms, p99 %.2f ms\n",
        ran_.size(), errors_, Mean(waited_) * 1e3, Percentile(waited_, 0.99) * 1e3,
        Mean(ran_) * 1e3, Percentile(ran_, 0.5) * 1e3, Percentile(ran_, 0.99) * 1e3);
  }

 private:
  std::atomic<int64_t> submitted_{0};
  mutable absl::Mutex mu_;
  std::vector<double> waited_ ABSL_GUARDED_BY(mu_);
  std::vector<double> ran_ ABSL_GUARDED_BY(mu_);
  int errors_ ABSL_GUARDED_BY(mu_) = 0;
};

// Counts the pods of a namespace as the server reports them (a watch), the
// same way for every controller measured.
class PodWatcher {
 public:
  PodWatcher(std::unique_ptr<kube::KubeClient> client, std::string ns)
      : client_(std::move(client)), ns_(std::move(ns)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~PodWatcher() {
    stop_ = true;
    {
      absl::MutexLock lock(&mu_);
      if (stream_ != nullptr) stream_->Cancel();
    }
    thread_.join();
  }
  int Count() const { return count_.load(); }
  // Waits until `n` pods exist; the seconds from `t0`, or a negative value on
  // timeout.
  double WaitFor(int n, SteadyClock::time_point t0, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return count_.load() >= n; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&reached), timeout)) return -1;
    return std::chrono::duration<double>(reached_at_[n] - t0).count();
  }
  // Has the watch delivered its first answer (the server accepted it)?
  bool Watching() const { return watching_.load(); }

 private:
  void Run() {
    std::string rv;
    while (!stop_) {
      kube::WatchOptions options;
      options.resource_version = rv;
      options.timeout_seconds = 3600;
      absl::StatusOr<std::unique_ptr<kube::WatchStream>> stream =
          client_->Watch(kube::kPods, ns_, options);
      if (!stream.ok()) {
        absl::SleepFor(absl::Milliseconds(100));
        continue;
      }
      {
        absl::MutexLock lock(&mu_);
        stream_ = stream->get();
      }
      watching_ = true;
      kube::WatchEvent event;
      while (!stop_) {
        absl::StatusOr<bool> next = (*stream)->Next(&event);
        if (!next.ok() || !*next) break;
        if (event.type == kube::WatchEventType::kBookmark) continue;
        rv = kube::ResourceVersionOf(event.object);
        if (event.type != kube::WatchEventType::kAdded) continue;
        absl::MutexLock lock(&mu_);
        if (seen_.insert(kube::Name(event.object)).second) {
          const int n = ++count_;
          reached_at_[n] = SteadyClock::now();
        }
      }
      absl::MutexLock lock(&mu_);
      stream_ = nullptr;
    }
  }

  std::unique_ptr<kube::KubeClient> client_;
  const std::string ns_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> watching_{false};
  std::atomic<int> count_{0};
  absl::Mutex mu_;
  kube::WatchStream* stream_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::set<std::string> seen_ ABSL_GUARDED_BY(mu_);
  std::map<int, SteadyClock::time_point> reached_at_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// The API server's own count of the requests it served
// (apiserver_request_total), by "VERB resource[/subresource]": the same
// measure for every controller, whatever client it uses.
class ServerRequests {
 public:
  explicit ServerRequests(const testing::KubeTestTarget& target) {
    kube::RealConfigEnvironment env;
    absl::StatusOr<std::unique_ptr<kube::CpprestTransport>> t =
        kube::CpprestTransport::Create(target.config(), {}, env, clock_);
    if (t.ok()) transport_ = *std::move(t);
  }
  std::map<std::string, double> Snapshot() const {
    std::map<std::string, double> out;
    if (transport_ == nullptr) return out;
    absl::StatusOr<kube::HttpResponse> page = transport_->Send({"GET", "/metrics", "", ""});
    if (!page.ok() || page->status != 200) return out;
    absl::StatusOr<controller::PrometheusExposition> parsed =
        controller::ParsePrometheusText(page->body);
    if (!parsed.ok()) return out;
    for (const controller::PrometheusSample& s : parsed->samples) {
      if (s.name != "apiserver_request_total") continue;
      auto label = [&](const char* k) {
        auto it = s.labels.find(k);
        return it == s.labels.end() ? std::string() : it->second;
      };
      std::string key = absl::StrCat(label("verb"), " ", label("resource"));
      if (!label("subresource").empty()) absl::StrAppend(&key, "/", label("subresource"));
      out[key] += s.value;
    }
    return out;
  }
  // after - before, for the resources a controller writes or reads.
  static std::map<std::string, double> Delta(const std::map<std::string, double>& before,
                                             const std::map<std::string, double>& after) {
    std::map<std::string, double> out;
    for (const auto& [k, v] : after) {
      const double d = v - (before.count(k) ? before.at(k) : 0);
      const std::string resource = k.substr(k.find(' ') + 1);
      static const std::set<std::string> kShown = {"pods",   "services",     "secrets",
                                                   "events", "trainingjobs", "trainingjobs/status",
                                                   "jobs",   "jobs/status",  "pods/status"};
      if (d > 0 && kShown.count(resource)) out[k] = d;
    }
    return out;
  }

 private:
  RealClock clock_;
  std::unique_ptr<kube::CpprestTransport> transport_;
};

void PrintServerRequests(const std::map<std::string, double>& delta, int jobs,
                         const std::string& bench_creates) {
  double total = 0;
  std::string rows;
  for (const auto& [k, v] : delta) {
    if (k == bench_creates) continue;  // the bench's own job creates
    total += v;
    absl::StrAppend(&rows, " ", k, " ", absl::StrFormat("%.2f", v / jobs), ";");
  }
  std::printf(
      "  server-side requests (apiserver_request_total, bench's creates excluded): %.0f, "
      "%.2f per job:%s\n",
      total, total / jobs, rows.c_str());
}

Json Container() {
  return Json{{"name", "kubetrain"},
              {"image", "registry.example.com/ml/kubetrain:0.1.0"},
              {"args", Json::array({"train", "--model=mlp", "--epochs=5"})}};
}

Json MakeTrainingJob(const std::string& ns, int index, const std::string& service_mode) {
  auto replica = [&](int n) {
    Json spec;
    spec["replicas"] = n;
    spec["template"]["spec"]["containers"] = Json::array({Container()});
    return spec;
  };
  Json job{{"apiVersion", api::kApiVersion},
           {"kind", "TrainingJob"},
           {"metadata", {{"name", absl::StrCat("job-", index)}, {"namespace", ns}}},
           {"spec", {{"replicaSpecs", {{"PS", replica(1)}, {"Worker", replica(3)}}}}}};
  if (service_mode != "PerReplica") job["spec"]["serviceMode"] = service_mode;
  return job;
}

Json MakeBatchJob(const std::string& ns, int index) {
  Json pod_spec{{"restartPolicy", "Never"}, {"containers", Json::array({Container()})}};
  return Json{{"metadata", {{"name", absl::StrCat("job-", index)}, {"namespace", ns}}},
              {"spec",
               {{"parallelism", 4},
                {"completions", 4},
                {"backoffLimit", 0},
                {"template", {{"spec", pod_spec}}}}}};
}

// A fresh namespace whose default ServiceAccount exists (pods are refused
// before the controller-manager has made it).
std::unique_ptr<testing::KubeTestTarget> FreshNamespace() {
  absl::StatusOr<std::unique_ptr<testing::KubeTestTarget>> target =
      testing::KubeTestTarget::Create();
  if (!target.ok()) {
    std::cerr << "namespace: " << target.status() << "\n";
    return nullptr;
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (!(*target)->client().Get(kServiceAccounts, (*target)->ns(), "default").ok()) {
    if (absl::Now() > deadline) {
      std::cerr << "no default ServiceAccount in " << (*target)->ns() << " after 60 s\n";
      return nullptr;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return *std::move(target);
}

using Namespaces = std::vector<std::unique_ptr<testing::KubeTestTarget>>;

// Deletes the namespaces and waits until the server has removed them and
// everything in them (minutes for thousands of pods on 2 cores), once, after
// every run: deleting between runs would load the server during the next.
void DropNamespaces(Namespaces namespaces) {
  if (namespaces.empty()) return;
  std::vector<std::string> names;
  absl::StatusOr<std::unique_ptr<kube::KubeClient>> client = namespaces.front()->NewClient();
  for (const auto& t : namespaces) names.push_back(t->ns());
  namespaces.clear();  // each target deletes its namespace
  const auto t0 = SteadyClock::now();
  for (const std::string& ns : names) {
    while (client.ok() && Since(t0) < 900) {
      absl::StatusOr<Json> got = (*client)->Get(kube::kNamespaces, "", ns);
      if (!got.ok() && absl::IsNotFound(got.status())) break;
      absl::SleepFor(absl::Milliseconds(500));
    }
  }
  std::printf("(%zu namespaces removed in %.1f s)\n", names.size(), Since(t0));
}

struct RunResult {
  double pods_s = -1;  // first create -> all pods exist; < 0: timeout
  double creates_s = 0;
  int create_errors = 0;
};

void PrintPods(const char* who, int want, const RunResult& r) {
  if (r.pods_s < 0) {
    std::printf("  %s: TIMEOUT before all %d pods existed\n", who, want);
  } else {
    std::printf(
        "  %s: first create -> all %d pods exist: %.2f s (%.0f pods/s); creates took "
        "%.2f s, %d errors\n",
        who, want, r.pods_s, want / r.pods_s, r.creates_s, r.create_errors);
  }
}

// Our controller in this process, its client counted and throttled.
RunResult RunOperatorInProcess(const RealClusterOptions& o, int workers, int action_threads,
                               Namespaces* done) {
  const int want = o.jobs * 4;
  RunResult result;
  std::unique_ptr<testing::KubeTestTarget> target = FreshNamespace();
  if (target == nullptr) return result;
  kube::RealConfigEnvironment env;
  RealClock clock;
  absl::StatusOr<std::unique_ptr<kube::CpprestTransport>> transport =
      kube::CpprestTransport::Create(target->config(), {}, env, clock);
  if (!transport.ok()) {
    std::cerr << "transport: " << transport.status() << "\n";
    return result;
  }
  auto counting = std::make_unique<CountingTransport>(*std::move(transport));
  CountingTransport* counts = counting.get();
  auto throttled =
      std::make_unique<kube::ThrottledTransport>(std::move(counting), o.throttle, clock);
  kube::ThrottledTransport* throttle = throttled.get();
  kube::KubeClient client(std::move(throttled));

  RecordingMetrics metrics;
  QueueLatencies queue;
  PlanTimes plans;
  kube::StreamLogger logger(std::cerr, kube::StreamLogger::Format::kText, kube::LogLevel::kError);
  controller::ControllerOptions options;
  options.watch_namespace = target->ns();
  options.workers = workers;
  options.progress_interval = absl::ZeroDuration();
  options.queue_observer = &queue;
  options.action_threads = action_threads;
  options.action_observer = &plans;
  auto ctrl = std::make_unique<controller::TrainingJobController>(client, options, &metrics, clock,
                                                                  &logger);
  if (absl::Status s = ctrl->Start(); !s.ok()) {
    std::cerr << "controller: " << s << "\n";
    return result;
  }
  PodWatcher watcher(*target->NewClient(), target->ns());
  while (!watcher.Watching()) absl::SleepFor(absl::Milliseconds(10));
  const std::map<std::string, int64_t> before = counts->Counts();
  ServerRequests server(*target);
  const std::map<std::string, double> server_before = server.Snapshot();

  const auto t0 = SteadyClock::now();
  result.create_errors =
      CreateAll(*target, kube::kTrainingJobs, o.jobs, o.create_threads,
                [&](int i) { return MakeTrainingJob(target->ns(), i, o.service_mode); });
  result.creates_s = Since(t0);
  result.pods_s = watcher.WaitFor(want, t0, absl::Minutes(15));
  // Settled: no reconcile for 2 s and no plan of requests left (status
  // writes and events of the last pods).
  const auto settle0 = SteadyClock::now();
  while ((metrics.SecondsSinceLastReconcile() < 2.0 || !plans.Idle()) && Since(settle0) < 300) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  const double settled_s = Since(t0) - 2.0;
  std::map<std::string, int64_t> after = counts->Counts();
  const std::map<std::string, double> server_delta =
      ServerRequests::Delta(server_before, server.Snapshot());
  int errors = 0;
  const std::vector<double> lat = metrics.Latencies(&errors);
  const std::vector<double> waits = queue.Seconds();
  ctrl->Stop();
  ctrl.reset();

  std::printf(
      "kubetrain controller in process: --workers=%d action threads %d%s --kube-api-qps=%g "
      "--kube-api-burst=%d serviceMode=%s\n",
      workers, action_threads, action_threads == 0 ? " (workers send the requests)" : "",
      o.throttle.qps, o.throttle.burst, o.service_mode.c_str());
  PrintPods("TrainingJobs (1 PS + 3 Workers)", want, result);
  std::printf(
      "  settled (last reconcile, every plan of requests done) %.2f s after the first create\n",
      settled_s);
  int64_t total = 0;
  std::string breakdown;
  for (const auto& [what, n] : after) {
    const int64_t d = n - (before.count(what) ? before.at(what) : 0);
    if (d == 0) continue;
    total += d;
    absl::StrAppend(&breakdown, "    ", what, ": ", d, " (",
                    absl::StrFormat("%.2f", static_cast<double>(d) / o.jobs), "/job)\n");
  }
  auto per_job = [&](const std::string& what) {
    const int64_t n =
        (after.count(what) ? after.at(what) : 0) - (before.count(what) ? before.at(what) : 0);
    return static_cast<double>(n) / o.jobs;
  };
  std::printf("  API requests: %lld in all, %.2f per job; status writes %.2f per job\n",
              static_cast<long long>(total), static_cast<double>(total) / o.jobs,
              per_job("PUT trainingjobs/status"));
  std::printf("%s", breakdown.c_str());
  for (const auto& [what, n] : counts->Answers()) {
    std::printf("    answered %s: %lld\n", what.c_str(), static_cast<long long>(n));
  }
  PrintServerRequests(server_delta, o.jobs, "POST trainingjobs");
  std::printf("  client throttle: %lld requests waited, %.2f s in all\n",
              static_cast<long long>(throttle->throttled()),
              absl::ToDoubleSeconds(throttle->waited()));
  std::printf("  queue wait: mean %.2f ms, p50 %.2f ms, p99 %.2f ms (%zu hand-outs)\n",
              Mean(waits) * 1e3, Percentile(waits, 0.5) * 1e3, Percentile(waits, 0.99) * 1e3,
              waits.size());
  std::printf(
      "  reconcile (Reconcile()'s run time%s): %zu (%d errors), mean %.2f ms, p50 %.2f ms, p99 "
      "%.2f ms, max %.2f ms\n",
      action_threads == 0 ? ", its requests included" : ": reading caches, deciding, handing over",
      lat.size(), errors, Mean(lat) * 1e3, Percentile(lat, 0.5) * 1e3, Percentile(lat, 0.99) * 1e3,
      Percentile(lat, 1.0) * 1e3);
  plans.Print();
  std::fflush(stdout);
  done->push_back(std::move(target));
  return result;
}

// GET /readyz on 127.0.0.1:port answered 200?
bool Ready(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const char request[] = "GET /readyz HTTP/1.0\r\n\r\n";
    if (::write(fd, request, sizeof(request) - 1) > 0) {
      char buf[64] = {};
      ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
      ok = n > 12 && std::string(buf, static_cast<size_t>(n)).find(" 200") != std::string::npos;
    }
  }
  ::close(fd);
  return ok;
}

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// The binary's --action-threads: the last non-zero --action-threads of the
// bench (0 means "workers send the requests", which only the in-process
// controller can do), else the operator's default.
int BinaryActionThreads(const RealClusterOptions& o) {
  int n = 16;
  for (int t : o.action_threads) {
    if (t > 0) n = t;
  }
  return n;
}

// The kubetrain-operator binary in its own process: its peak RSS.
RunResult RunOperatorBinary(const RealClusterOptions& o, int workers, const std::string& kubeconfig,
                            Namespaces* done) {
  const int want = o.jobs * 4;
  RunResult result;
  std::unique_ptr<testing::KubeTestTarget> target = FreshNamespace();
  if (target == nullptr) return result;
  const int health = FreePort();
  const std::string ns = target->ns();
  const std::vector<std::string> args = {
      o.operator_binary,
      "--kubeconfig=" + kubeconfig,
      "--leader-elect=false",
      "--metrics-bind-address=127.0.0.1:0",
      absl::StrCat("--health-probe-bind-address=127.0.0.1:", health),
      "--webhook-bind-address=0",
      "--namespace=" + ns,
      "--progress-interval=0",
      absl::StrCat("--workers=", workers),
      absl::StrCat("--action-threads=", BinaryActionThreads(o)),
      "--log-level=error"};
  std::vector<std::string> argv_strings = args;
  if (!o.binary_without_rate_limit) {
    argv_strings.push_back(absl::StrCat("--kube-api-qps=", o.throttle.qps));
    argv_strings.push_back(absl::StrCat("--kube-api-burst=", o.throttle.burst));
  }
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const std::string& a : argv_strings) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  const auto up0 = SteadyClock::now();
  while (!Ready(health) && Since(up0) < 60) absl::SleepFor(absl::Milliseconds(50));
  const double idle_hwm = VmHwmMiB(pid);
  PodWatcher watcher(*target->NewClient(), ns);
  while (!watcher.Watching()) absl::SleepFor(absl::Milliseconds(10));
  ServerRequests server(*target);
  const std::map<std::string, double> server_before = server.Snapshot();
  const auto t0 = SteadyClock::now();
  result.create_errors = CreateAll(*target, kube::kTrainingJobs, o.jobs, o.create_threads,
                                   [&](int i) { return MakeTrainingJob(ns, i, o.service_mode); });
  result.creates_s = Since(t0);
  result.pods_s = watcher.WaitFor(want, t0, absl::Minutes(15));
  absl::SleepFor(absl::Seconds(3));  // the status writes and events after the last pod
  const std::map<std::string, double> server_delta =
      ServerRequests::Delta(server_before, server.Snapshot());
  const double hwm = VmHwmMiB(pid);
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  std::printf("kubetrain-operator process (%s), --workers=%d --action-threads=%d, %s:\n",
              o.operator_binary.c_str(), workers, BinaryActionThreads(o),
              o.binary_without_rate_limit ? "no client rate limit (a build without the flags)"
                                          : "same rate limit");
  PrintPods("TrainingJobs", want, result);
  std::printf("  operator peak RSS (VmHWM): %.1f MiB (%.1f MiB once synced, before the jobs)\n",
              hwm, idle_hwm);
  PrintServerRequests(server_delta, o.jobs, "POST trainingjobs");
  std::fflush(stdout);
  done->push_back(std::move(target));
  return result;
}

// kube-controller-manager's Job controller: Jobs of parallelism 4.
RunResult RunJobController(const RealClusterOptions& o, Namespaces* done) {
  const int want = o.jobs * 4;
  RunResult result;
  std::unique_ptr<testing::KubeTestTarget> target = FreshNamespace();
  if (target == nullptr) return result;
  PodWatcher watcher(*target->NewClient(), target->ns());
  while (!watcher.Watching()) absl::SleepFor(absl::Milliseconds(10));
  ServerRequests server(*target);
  const std::map<std::string, double> server_before = server.Snapshot();
  const auto t0 = SteadyClock::now();
  result.create_errors = CreateAll(*target, kJobs, o.jobs, o.create_threads,
                                   [&](int i) { return MakeBatchJob(target->ns(), i); });
  result.creates_s = Since(t0);
  result.pods_s = watcher.WaitFor(want, t0, absl::Minutes(15));
  absl::SleepFor(absl::Seconds(3));  // the status writes and events after the last pod
  const std::map<std::string, double> server_delta =
      ServerRequests::Delta(server_before, server.Snapshot());
  std::printf("kube-controller-manager Job controller (%s):\n", o.kcm_rate_limit.c_str());
  PrintPods("Jobs (parallelism 4)", want, result);
  PrintServerRequests(server_delta, o.jobs, "POST jobs");
  std::fflush(stdout);
  done->push_back(std::move(target));
  return result;
}

}  // namespace

int RunRealCluster(const RealClusterOptions& o) {
  const char* kubeconfig = std::getenv("KUBETRAIN_TEST_KUBECONFIG");
  if (kubeconfig == nullptr || *kubeconfig == '\0') {
    std::printf(
        "--real-cluster: skipped, KUBETRAIN_TEST_KUBECONFIG is not set (scripts/"
        "operator-bench-real.sh starts a control plane and sets it)\n");
    return 0;
  }
  std::printf("real API server (%s): %d jobs x 4 pods, nproc %u\n", kubeconfig, o.jobs,
              std::thread::hardware_concurrency());
  std::fflush(stdout);
  int rc = 0;
  Namespaces done;
  std::vector<std::pair<std::string, double>> ours;
  auto run_binary = [&] {
    for (int workers : o.workers) {
      if (o.operator_binary.empty()) break;
      RunResult r = RunOperatorBinary(o, workers, kubeconfig, &done);
      if (r.pods_s < 0) rc = 1;
      ours.emplace_back(absl::StrCat("kubetrain-operator, --workers=", workers,
                                     " --action-threads=", BinaryActionThreads(o)),
                        r.pods_s);
    }
  };
  if (o.binary_first) run_binary();
  for (int workers : o.workers) {
    if (!o.in_process) break;
    for (int threads : o.action_threads) {
      RunResult r = RunOperatorInProcess(o, workers, threads, &done);
      if (r.pods_s < 0) rc = 1;
      ours.emplace_back(
          absl::StrCat("in process, --workers=", workers, ", action threads ", threads), r.pods_s);
    }
  }
  RunResult jobs;
  if (o.job_controller) {
    jobs = RunJobController(o, &done);
    if (jobs.pods_s < 0) rc = 1;
  }
  if (!o.binary_first) run_binary();
  for (const auto& [what, seconds] : ours) {
    if (o.job_controller && seconds > 0 && jobs.pods_s > 0) {
      std::printf("all pods exist: kubetrain (%s) %.2f s vs Job controller %.2f s: ratio %.2f\n",
                  what.c_str(), seconds, jobs.pods_s, seconds / jobs.pods_s);
    }
  }
  std::fflush(stdout);
  if (o.keep_namespaces) {
    for (auto& target : done) {
      std::printf("(namespace %s left on the server)\n", target->ns().c_str());
      (void)target.release();  // its destructor would delete the namespace
    }
  } else {
    DropNamespaces(std::move(done));
  }
  return rc;
}

}  // namespace kubetrain::bench
