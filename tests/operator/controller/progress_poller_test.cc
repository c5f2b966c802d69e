// ProgressPoller against the API emulator (or KUBETRAIN_TEST_KUBECONFIG):
// informers feed the job and pod caches, a loopback HTTP server plays
// the chief's metrics endpoint, and status.progress is read back from the
// server. Plus the pure helpers (running phase, URL, sample selection) and
// edge cases through a fake fetcher.
#include "operator/controller/progress_poller.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "operator/kube/informer.h"
#include "operator/kube/object.h"
#include "testing/kube_test_target.h"
#include "tests/support/wait_for.h"

namespace kubetrain::controller {
namespace {

using Json = nlohmann::json;
using testing::KubeTestTarget;
using testing_util::WaitFor;

// --- a metrics endpoint on loopback ---

// A one-thread HTTP/1.1 server on 127.0.0.1:<any port> answering every GET
// with the code and body set last, then closing the connection. (civetweb
// takes up to 2 s to stop when idle; this stops at once.)
class MetricsServer {
 public:
  static std::unique_ptr<MetricsServer> Start() {
    std::unique_ptr<MetricsServer> server(new MetricsServer());
    server->fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (server->fd_ < 0) return nullptr;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    if (bind(server->fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(server->fd_, 16) != 0 ||
        getsockname(server->fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return nullptr;
    }
    server->port_ = ntohs(addr.sin_port);
    server->thread_ = std::thread([s = server.get()] { s->Loop(); });
    return server;
  }
  ~MetricsServer() {
    stopping_ = true;
    shutdown(fd_, SHUT_RDWR);  // wakes accept()
    if (thread_.joinable()) thread_.join();
    close(fd_);
  }

  int port() const { return port_; }
  void Serve(int code, std::string body) {
    absl::MutexLock lock(&mu_);
    code_ = code;
    body_ = std::move(body);
  }
  int Requests() {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(paths_.size());
  }
  std::vector<std::string> Paths() {
    absl::MutexLock lock(&mu_);
    return paths_;
  }

 private:
  MetricsServer() = default;

  void Loop() {
    while (!stopping_) {
      const int conn = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) continue;  // EINTR, or EINVAL after shutdown
      Answer(conn);
      close(conn);
    }
  }

  void Answer(int conn) {
    std::string request;
    char buf[4096];
    while (request.find("\r\n\r\n") == std::string::npos && request.size() < 65536) {
      const ssize_t n = recv(conn, buf, sizeof(buf), 0);
      if (n <= 0) return;
      request.append(buf, static_cast<size_t>(n));
    }
    // "GET /metrics HTTP/1.1"
    const size_t first = request.find(' ');
    const size_t second = request.find(' ', first + 1);
    const std::string path = first == std::string::npos || second == std::string::npos
                                 ? ""
                                 : request.substr(first + 1, second - first - 1);
    int code;
    std::string body;
    {
      absl::MutexLock lock(&mu_);
      paths_.push_back(path);
      code = code_;
      body = body_;
    }
    const std::string response =
        absl::StrCat("HTTP/1.1 ", code, code == 200 ? " OK" : " Error",
                     "\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: ", body.size(),
                     "\r\nConnection: close\r\n\r\n", body);
    size_t sent = 0;
    while (sent < response.size()) {
      const ssize_t n = send(conn, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }

  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  absl::Mutex mu_;
  int code_ ABSL_GUARDED_BY(mu_) = 200;
  std::string body_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> paths_ ABSL_GUARDED_BY(mu_);
};

// --- logs, counted ---

class CapturingLogger final : public kube::Logger {
 public:
  void Log(kube::LogLevel level, absl::string_view component, absl::string_view message) override {
    absl::MutexLock lock(&mu_);
    lines_.push_back({level, std::string(message)});
  }
  int Count(kube::LogLevel level) {
    absl::MutexLock lock(&mu_);
    int n = 0;
    for (const auto& [l, m] : lines_) n += l == level;
    return n;
  }
  std::string All() {
    absl::MutexLock lock(&mu_);
    std::string out;
    for (const auto& [l, m] : lines_) absl::StrAppend(&out, kube::LogLevelName(l), " ", m, "\n");
    return out;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::pair<kube::LogLevel, std::string>> lines_ ABSL_GUARDED_BY(mu_);
};

// --- a fetcher answering from a map ---

class FakeFetcher final : public MetricsFetcher {
 public:
  void Set(const std::string& url, absl::StatusOr<std::string> answer) {
    absl::MutexLock lock(&mu_);
    answers_.insert_or_assign(url, std::move(answer));
  }
  absl::StatusOr<std::string> Fetch(const std::string& url) override {
    absl::MutexLock lock(&mu_);
    urls_.push_back(url);
    auto it = answers_.find(url);
    if (it == answers_.end()) return absl::UnavailableError(absl::StrCat("no answer for ", url));
    return it->second;
  }
  std::vector<std::string> Urls() {
    absl::MutexLock lock(&mu_);
    return urls_;
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, absl::StatusOr<std::string>> answers_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> urls_ ABSL_GUARDED_BY(mu_);
};

Json Condition(const std::string& type, const std::string& status = "True") {
  return Json{{"type", type},
              {"status", status},
              {"reason", "Test"},
              {"message", ""},
              {"lastTransitionTime", "2026-01-01T00:00:00Z"},
              {"lastUpdateTime", "2026-01-01T00:00:00Z"}};
}

// The chief's page: its own series plus a worker-1 series that must be ignored.
std::string Page(const std::string& job, const std::string& ns, int step, double loss,
                 bool with_eval = true) {
  auto labels = [&](const std::string& type, int index) {
    return absl::StrCat("{training_job=\"", job, "\",training_namespace=\"", ns,
                        "\",replica_type=\"", type, "\",replica_index=\"", index, "\"}");
  };
  const std::string me = labels("worker", 0);
  const std::string other = labels("worker", 1);
  std::string text = absl::StrCat(
      "# HELP kubetrain_global_step Step this replica has reached.\n"
      "# TYPE kubetrain_global_step gauge\n",
      "kubetrain_global_step", other, " 999999\n", "kubetrain_global_step", me, " ", step, "\n",
      "# TYPE kubetrain_total_steps gauge\n", "kubetrain_total_steps", me, " 1000\n",
      "kubetrain_train_loss", other, " 42\n", "kubetrain_train_loss", me, " ", loss, "\n",
      "kubetrain_train_accuracy_ratio", me, " 0.5\n", "kubetrain_samples_per_second", me,
      " 250.5\n");
  if (with_eval) absl::StrAppend(&text, "kubetrain_eval_accuracy_ratio", me, " 0.875\n");
  return text;
}

class ProgressPollerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<KubeTestTarget>> target = KubeTestTarget::Create();
    ASSERT_TRUE(target.ok()) << target.status();
    target_ = *std::move(target);
    kube::InformerOptions options;
    options.namespace_name = target_->ns();
    options.min_backoff = absl::Milliseconds(20);
    options.max_backoff = absl::Milliseconds(200);
    jobs_ =
        std::make_unique<kube::Informer>(client(), kube::kTrainingJobs, options, clock_, &quiet_);
    pods_ = std::make_unique<kube::Informer>(client(), kube::kPods, options, clock_, &quiet_);
    jobs_->Start();
    pods_->Start();
    ASSERT_TRUE(jobs_->WaitForSync(absl::Seconds(20)));
    ASSERT_TRUE(pods_->WaitForSync(absl::Seconds(20)));
    server_ = MetricsServer::Start();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    if (jobs_) jobs_->Stop();
    if (pods_) pods_->Stop();
  }

  kube::KubeClient& client() { return target_->client(); }
  const std::string& ns() { return target_->ns(); }

  std::unique_ptr<ProgressPoller> MakePoller(MetricsFetcher& fetcher,
                                             ProgressPollerOptions options = {}) {
    return std::make_unique<ProgressPoller>(client(), jobs_->cache(), pods_->cache(), fetcher,
                                            options, &log_);
  }

  // A TrainingJob whose status has `conditions`; returns it as stored.
  Json CreateJob(const std::string& name, const Json& conditions) {
    Json job{{"apiVersion", "kubetrain.io/v1alpha1"},
             {"kind", "TrainingJob"},
             {"metadata", {{"name", name}}},
             {"spec",
              {{"replicaSpecs",
                {{"Worker",
                  {{"replicas", 2},
                   {"restartPolicy", "Never"},
                   {"template",
                    {{"spec",
                      {{"containers",
                        Json::array({{{"name", "kubetrain"}, {"image", "kubetrain"}}})}}}}}}}}}}}};
    absl::StatusOr<Json> created = client().Create(kube::kTrainingJobs, ns(), job);
    EXPECT_TRUE(created.ok()) << created.status();
    if (!created.ok()) return Json();
    Json with_status = *created;
    with_status["status"] = {{"conditions", conditions}};
    absl::StatusOr<Json> updated = client().UpdateStatus(kube::kTrainingJobs, with_status);
    EXPECT_TRUE(updated.ok()) << updated.status();
    if (!updated.ok()) return Json();
    const std::string version = kube::ResourceVersionOf(*updated);
    const std::string key = kube::ObjectKey(ns(), name);
    EXPECT_TRUE(WaitFor([&] {
      kube::ObjectPtr cached = jobs_->cache().Get(key);
      return cached != nullptr && kube::ResourceVersionOf(*cached) == version;
    }));
    return *updated;
  }

  Json RunningJob(const std::string& name) {
    return CreateJob(name, Json::array({Condition("Created"), Condition("Running")}));
  }

  // A replica pod of `job`, Running at 127.0.0.1; `annotations` as given.
  Json CreatePod(const Json& job, int index, bool chief, const Json& annotations,
                 const std::string& phase = "Running") {
    const std::string job_name = kube::Name(job);
    Json labels{{"kubetrain.io/job-name", job_name},
                {"kubetrain.io/replica-type", "worker"},
                {"kubetrain.io/replica-index", std::to_string(index)}};
    if (chief) labels["kubetrain.io/job-role"] = "chief";
    Json pod{{"apiVersion", "v1"},
             {"kind", "Pod"},
             {"metadata",
              {{"name", absl::StrCat(job_name, "-worker-", index)},
               {"labels", labels},
               {"annotations", annotations},
               {"ownerReferences", Json::array({kube::ControllerReference(job)})}}},
             {"spec", {{"containers", Json::array({{{"name", "kubetrain"}, {"image", "x"}}})}}}};
    absl::StatusOr<Json> created = client().Create(kube::kPods, ns(), pod);
    EXPECT_TRUE(created.ok()) << created.status();
    if (!created.ok()) return Json();
    Json with_status = *created;
    with_status["status"] = {{"phase", phase}, {"podIP", "127.0.0.1"}};
    absl::StatusOr<Json> updated = client().UpdateStatus(kube::kPods, with_status);
    EXPECT_TRUE(updated.ok()) << updated.status();
    if (!updated.ok()) return Json();
    const std::string version = kube::ResourceVersionOf(*updated);
    const std::string key = kube::ObjectKey(*updated);
    EXPECT_TRUE(WaitFor([&] {
      kube::ObjectPtr cached = pods_->cache().Get(key);
      return cached != nullptr && kube::ResourceVersionOf(*cached) == version;
    }));
    return *updated;
  }

  Json ServedBy(const MetricsServer& server) {
    return Json{{"prometheus.io/scrape", "true"},
                {"prometheus.io/port", std::to_string(server.port())},
                {"prometheus.io/path", "/metrics"}};
  }

  Json Progress(const std::string& name) {
    absl::StatusOr<Json> job = client().Get(kube::kTrainingJobs, ns(), name);
    EXPECT_TRUE(job.ok()) << job.status();
    if (!job.ok() || !job->contains("status") || !(*job)["status"].contains("progress")) {
      return Json();
    }
    return (*job)["status"]["progress"];
  }

  // status.progress.step, or -1.
  int64_t StepOf(const std::string& name) {
    const Json progress = Progress(name);
    if (!progress.is_object() || !progress.contains("step")) return -1;
    return progress["step"].get<int64_t>();
  }

  // Until the job cache holds the server's progress (so "unchanged" is
  // judged against it).
  bool CacheHasProgress(const std::string& name) {
    const Json want = Progress(name);
    return WaitFor([&] {
      kube::ObjectPtr cached = jobs_->cache().Get(kube::ObjectKey(ns(), name));
      return cached != nullptr && cached->contains("status") &&
             (*cached)["status"].value("progress", Json()) == want;
    });
  }

  std::unique_ptr<KubeTestTarget> target_;
  RealClock clock_;
  kube::NullLogger quiet_;
  CapturingLogger log_;
  std::unique_ptr<kube::Informer> jobs_;
  std::unique_ptr<kube::Informer> pods_;
  std::unique_ptr<MetricsServer> server_;
};

TEST_F(ProgressPollerTest, WritesProgressFromTheChiefAndFollowsChanges) {
  std::unique_ptr<MetricsFetcher> fetcher = NewCurlMetricsFetcher(absl::Seconds(5));
  Json job = RunningJob("tj");
  CreatePod(job, 0, /*chief=*/true, ServedBy(*server_));
  CreatePod(job, 1, /*chief=*/false, ServedBy(*server_));
  server_->Serve(200, Page("tj", ns(), 120, 0.75));
  auto poller = MakePoller(*fetcher);

  EXPECT_EQ(poller->PollOnce(), 1) << log_.All();
  Json progress = Progress("tj");
  EXPECT_EQ(progress["step"], 120);
  EXPECT_EQ(progress["totalSteps"], 1000);
  EXPECT_EQ(progress["loss"], 0.75);
  EXPECT_EQ(progress["accuracy"], 0.875);  // eval accuracy wins over training accuracy
  EXPECT_EQ(progress["samplesPerSecond"], 250.5);
  ASSERT_TRUE(progress["updatedAt"].is_string());
  EXPECT_TRUE(kube::ParseTimeMicros(progress["updatedAt"].get<std::string>()).has_value());
  EXPECT_EQ(server_->Paths(), std::vector<std::string>{"/metrics"});  // the chief only

  // Unchanged values: fetched again, not written again.
  ASSERT_TRUE(CacheHasProgress("tj"));
  const int patches = target_->emulator() ? target_->emulator()->RequestCount("PATCH", "/tj") : 0;
  EXPECT_EQ(poller->PollOnce(), 0);
  EXPECT_EQ(server_->Requests(), 2);
  EXPECT_EQ(Progress("tj")["updatedAt"], progress["updatedAt"]);
  if (target_->emulator()) {
    EXPECT_EQ(target_->emulator()->RequestCount("PATCH", "/tj"), patches);
  }

  // New values: written at the next poll.
  server_->Serve(200, Page("tj", ns(), 340, 0.25));
  EXPECT_EQ(poller->PollOnce(), 1);
  progress = Progress("tj");
  EXPECT_EQ(progress["step"], 340);
  EXPECT_EQ(progress["loss"], 0.25);
  EXPECT_EQ(progress["totalSteps"], 1000);
  EXPECT_EQ(log_.Count(kube::LogLevel::kWarning), 0) << log_.All();
}

TEST_F(ProgressPollerTest, SkipsJobsThatAreNotRunningAndChiefsThatAreNotUp) {
  std::unique_ptr<MetricsFetcher> fetcher = NewCurlMetricsFetcher(absl::Seconds(5));
  server_->Serve(200, Page("any", ns(), 1, 1));
  // Created only; finished; running once but now succeeded (Running False).
  Json created = CreateJob("created", Json::array({Condition("Created")}));
  Json done = CreateJob("done", Json::array({Condition("Created"), Condition("Running", "False"),
                                             Condition("Succeeded")}));
  CreatePod(created, 0, true, ServedBy(*server_));
  CreatePod(done, 0, true, ServedBy(*server_));
  // Running, but its chief is still Pending.
  Json pending = RunningJob("pending");
  CreatePod(pending, 0, true, ServedBy(*server_), "Pending");
  // Running, but only a non-chief pod.
  Json headless = RunningJob("headless");
  CreatePod(headless, 1, false, ServedBy(*server_));

  auto poller = MakePoller(*fetcher);
  EXPECT_EQ(poller->PollOnce(), 0);
  EXPECT_EQ(server_->Requests(), 0);
  for (const char* name : {"created", "done", "pending", "headless"}) {
    EXPECT_TRUE(Progress(name).is_null()) << name;
  }
  EXPECT_EQ(log_.Count(kube::LogLevel::kWarning), 0) << log_.All();

  // Restarting counts as running.
  Json restarting = CreateJob(
      "restarting",
      Json::array({Condition("Created"), Condition("Running", "False"), Condition("Restarting")}));
  CreatePod(restarting, 0, true, ServedBy(*server_));
  server_->Serve(200, Page("restarting", ns(), 7, 2.5));
  EXPECT_EQ(poller->PollOnce(), 1);
  EXPECT_EQ(Progress("restarting")["step"], 7);
}

TEST_F(ProgressPollerTest, BrokenEndpointKeepsProgressAndWarnsOncePerStreak) {
  std::unique_ptr<MetricsFetcher> fetcher = NewCurlMetricsFetcher(absl::Seconds(5));
  Json job = RunningJob("flaky");
  CreatePod(job, 0, true, ServedBy(*server_));
  server_->Serve(200, Page("flaky", ns(), 50, 1.5));
  auto poller = MakePoller(*fetcher);
  ASSERT_EQ(poller->PollOnce(), 1) << log_.All();
  const Json good = Progress("flaky");

  // HTTP 500, then a page that does not parse: one streak, one warning.
  server_->Serve(500, "internal error\n");
  EXPECT_EQ(poller->PollOnce(), 0);
  EXPECT_EQ(poller->PollOnce(), 0);
  server_->Serve(200, "kubetrain_global_step{training_job=\"flaky\" 60\n");
  EXPECT_EQ(poller->PollOnce(), 0);
  EXPECT_EQ(Progress("flaky"), good);
  EXPECT_EQ(log_.Count(kube::LogLevel::kWarning), 1) << log_.All();
  EXPECT_TRUE(absl::StrContains(log_.All(), "flaky")) << log_.All();
  EXPECT_TRUE(absl::StrContains(log_.All(), "HTTP 500")) << log_.All();

  // Back: progress moves on, one info line; a new streak warns again.
  server_->Serve(200, Page("flaky", ns(), 60, 1.25));
  EXPECT_EQ(poller->PollOnce(), 1);
  EXPECT_EQ(Progress("flaky")["step"], 60);
  EXPECT_EQ(log_.Count(kube::LogLevel::kInfo), 1) << log_.All();
  server_->Serve(200, "not a metrics page at all\n");
  EXPECT_EQ(poller->PollOnce(), 0);
  EXPECT_EQ(poller->PollOnce(), 0);
  EXPECT_EQ(log_.Count(kube::LogLevel::kWarning), 2) << log_.All();
  EXPECT_TRUE(absl::StrContains(log_.All(), "line 1")) << log_.All();
  EXPECT_EQ(Progress("flaky")["step"], 60);

  // Nobody listening (connection refused) is a failure like the others.
  const int port = server_->port();
  server_.reset();
  CreatePod(RunningJob("gone"), 0, true, Json{{"prometheus.io/port", std::to_string(port)}});
  EXPECT_EQ(poller->PollOnce(), 0);
  EXPECT_EQ(log_.Count(kube::LogLevel::kWarning), 3) << log_.All();
  EXPECT_TRUE(Progress("gone").is_null());
}

TEST_F(ProgressPollerTest, RejectedWritesWarnOncePerStreak) {
  KT_REQUIRE_EMULATOR(target_);
  FakeFetcher fetcher;
  CreatePod(RunningJob("denied"), 0, true, Json::object());
  fetcher.Set("http://127.0.0.1:8090/metrics", "kubetrain_global_step 3\n");
  target_->emulator()->InjectFault(
      {.method = "PATCH", .path_substring = "/denied/status", .http_code = 403, .count = 2});
  auto poller = MakePoller(fetcher);
  EXPECT_EQ(poller->PollOnce(), 0);
  EXPECT_EQ(poller->PollOnce(), 0);
  EXPECT_TRUE(Progress("denied").is_null());
  EXPECT_EQ(log_.Count(kube::LogLevel::kWarning), 1) << log_.All();
  EXPECT_TRUE(absl::StrContains(log_.All(), "writing status.progress")) << log_.All();
  EXPECT_EQ(poller->PollOnce(), 1);
  EXPECT_EQ(StepOf("denied"), 3);
  EXPECT_EQ(log_.Count(kube::LogLevel::kInfo), 1) << log_.All();
}

TEST_F(ProgressPollerTest, FakeFetcherOtherReplicasIgnoredMissingMetricsOmitted) {
  FakeFetcher fetcher;
  // No annotations: the default port and path.
  Json job = RunningJob("edge");
  CreatePod(job, 0, true, Json::object());
  const std::string url = "http://127.0.0.1:8090/metrics";
  // Other replicas' series (and another job's) around an unlabelled step; no
  // loss, no samples/s; only training accuracy; total steps NaN.
  fetcher.Set(url, absl::StrCat("kubetrain_global_step{replica_type=\"worker\",replica_index=\"1\"}"
                                " 900\n",
                                "kubetrain_global_step{training_job=\"other\"} 800\n",
                                "kubetrain_global_step 30\n", "kubetrain_total_steps NaN\n",
                                "kubetrain_train_loss{replica_type=\"ps\"} 9\n",
                                "kubetrain_train_accuracy_ratio{training_namespace=\"", ns(),
                                "\"} 0.625\n"));
  auto poller = MakePoller(fetcher);
  EXPECT_EQ(poller->PollOnce(), 1) << log_.All();
  EXPECT_EQ(fetcher.Urls(), std::vector<std::string>{url});
  Json progress = Progress("edge");
  progress.erase("updatedAt");
  EXPECT_EQ(progress, (Json{{"step", 30}, {"accuracy", 0.625}}));

  // A metric that appears and then disappears: its field goes away again.
  fetcher.Set(url, "kubetrain_global_step 31\nkubetrain_train_loss 0.5\n");
  EXPECT_EQ(poller->PollOnce(), 1);
  progress = Progress("edge");
  progress.erase("updatedAt");
  EXPECT_EQ(progress, (Json{{"step", 31}, {"loss", 0.5}}));
  ASSERT_TRUE(CacheHasProgress("edge"));
  fetcher.Set(url, "kubetrain_global_step 31\n");
  EXPECT_EQ(poller->PollOnce(), 1);
  progress = Progress("edge");
  progress.erase("updatedAt");
  EXPECT_EQ(progress, (Json{{"step", 31}}));

  // A fetch error through the fake: kept, one warning.
  fetcher.Set(url, absl::UnavailableError("connection refused"));
  EXPECT_EQ(poller->PollOnce(), 0);
  EXPECT_EQ(poller->PollOnce(), 0);
  EXPECT_EQ(log_.Count(kube::LogLevel::kWarning), 1) << log_.All();
  EXPECT_EQ(Progress("edge")["step"], 31);
}

// The runtime's world: status.worldSize and status.generation follow the
// chief's kubetrain_world_size and kubetrain_world_generation, and each new
// generation written calls on_membership_change once, naming who joined and
// left since the generation before (kubetrain_world_member).
TEST_F(ProgressPollerTest, WritesTheWorldAndReportsEachNewGeneration) {
  FakeFetcher fetcher;
  Json job = RunningJob("world");
  CreatePod(job, 0, true, Json::object());
  const std::string url = "http://127.0.0.1:8090/metrics";
  auto page = [](int step, int size, int generation, const std::vector<int>& members) {
    std::string text = absl::StrCat("kubetrain_global_step ", step, "\nkubetrain_world_size ", size,
                                    "\nkubetrain_world_generation ", generation, "\n");
    for (int m : members) {
      absl::StrAppend(&text, "kubetrain_world_member{member=\"worker-", m, "\"} 1\n");
    }
    return text;
  };
  absl::Mutex mu;
  std::vector<std::string> changes;
  ProgressPollerOptions options;
  options.on_membership_change = [&](const Json& changed, const MembershipChange& change) {
    absl::MutexLock lock(&mu);
    changes.push_back(absl::StrCat(kube::Name(changed), ": ", MembershipChangedMessage(change)));
  };
  auto poller = MakePoller(fetcher, options);
  auto status = [&] {
    absl::StatusOr<Json> got = client().Get(kube::kTrainingJobs, ns(), "world");
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? got->value("status", Json::object()) : Json::object();
  };
  auto cache_has = [&](int generation) {
    return WaitFor([&] {
      kube::ObjectPtr cached = jobs_->cache().Get(kube::ObjectKey(ns(), "world"));
      return cached != nullptr && kube::IntAt(*cached, {"status", "generation"}, 0) == generation;
    });
  };
  auto seen = [&] {
    absl::MutexLock lock(&mu);
    return changes;
  };

  fetcher.Set(url, page(0, 3, 1, {0, 1, 2}));
  EXPECT_EQ(poller->PollOnce(), 1) << log_.All();
  EXPECT_EQ(status()["worldSize"], 3);
  EXPECT_EQ(status()["generation"], 1);
  EXPECT_EQ(seen(), std::vector<std::string>{"world: generation 1 formed at step 0: world 3"});
  ASSERT_TRUE(cache_has(1));
  // The same generation again: nothing written, nothing reported.
  fetcher.Set(url, page(0, 3, 1, {0, 1, 2}));
  EXPECT_EQ(poller->PollOnce(), 0);
  EXPECT_EQ(seen().size(), 1u);

  // A scale-up: worker-3 joins at step 1200.
  fetcher.Set(url, page(1200, 4, 2, {0, 1, 2, 3}));
  EXPECT_EQ(poller->PollOnce(), 1);
  EXPECT_EQ(status()["worldSize"], 4);
  EXPECT_EQ(status()["generation"], 2);
  EXPECT_EQ(status()["progress"]["step"], 1200);
  ASSERT_TRUE(cache_has(2));
  // worker-1 is lost and worker-2 leaves.
  fetcher.Set(url, page(1300, 2, 3, {0, 3}));
  EXPECT_EQ(poller->PollOnce(), 1);
  EXPECT_EQ(status()["worldSize"], 2);
  EXPECT_EQ(seen(),
            (std::vector<std::string>{
                "world: generation 1 formed at step 0: world 3",
                "world: generation 2 formed at step 1200: world 4 (joined worker-3)",
                "world: generation 3 formed at step 1300: world 2 (left worker-1, worker-2)"}));
  ASSERT_TRUE(cache_has(3));
  // A page without the world's series leaves the stored ones.
  fetcher.Set(url, "kubetrain_global_step 1400\n");
  EXPECT_EQ(poller->PollOnce(), 1);
  EXPECT_EQ(status()["worldSize"], 2);
  EXPECT_EQ(status()["generation"], 3);
  EXPECT_EQ(seen().size(), 3u);
}

TEST_F(ProgressPollerTest, ManyJobsInParallel) {
  FakeFetcher fetcher;
  constexpr int kJobs = 6;
  for (int i = 0; i < kJobs; ++i) {
    const std::string name = absl::StrCat("par", i);
    Json job = RunningJob(name);
    CreatePod(job, 0, true, Json{{"prometheus.io/port", std::to_string(9000 + i)}});
  }
  // Every pod has IP 127.0.0.1: the port tells them apart.
  for (int i = 0; i < kJobs; ++i) {
    fetcher.Set(absl::StrCat("http://127.0.0.1:", 9000 + i, "/metrics"),
                absl::StrCat("kubetrain_global_step ", 100 + i, "\n"));
  }
  ProgressPollerOptions options;
  options.max_parallel = 3;
  auto poller = MakePoller(fetcher, options);
  EXPECT_EQ(poller->PollOnce(), kJobs) << log_.All();
  for (int i = 0; i < kJobs; ++i) EXPECT_EQ(Progress(absl::StrCat("par", i))["step"], 100 + i);
}

TEST_F(ProgressPollerTest, StartPollsEveryIntervalAndStopIsPrompt) {
  std::unique_ptr<MetricsFetcher> fetcher = NewCurlMetricsFetcher(absl::Seconds(5));
  Json job = RunningJob("loop");
  CreatePod(job, 0, true, ServedBy(*server_));
  server_->Serve(200, Page("loop", ns(), 5, 3));
  ProgressPollerOptions options;
  options.interval = absl::Milliseconds(50);
  auto poller = MakePoller(*fetcher, options);
  poller->Start();
  EXPECT_TRUE(WaitFor([&] { return StepOf("loop") == 5; }));
  server_->Serve(200, Page("loop", ns(), 6, 3));
  EXPECT_TRUE(WaitFor([&] { return StepOf("loop") == 6; }));
  // A long interval: Stop must not wait for it.
  poller->Stop();
  ProgressPollerOptions slow;
  slow.interval = absl::Hours(1);
  auto idle = MakePoller(*fetcher, slow);
  idle->Start();
  EXPECT_TRUE(WaitFor([&] { return server_->Requests() >= 3; }));
  const absl::Time start = absl::Now();
  idle->Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

// --- pure helpers ---

TEST(ProgressHelpersTest, IsJobRunningReadsTheConditions) {
  auto job = [](Json conditions) { return Json{{"status", {{"conditions", conditions}}}}; };
  EXPECT_FALSE(IsJobRunning(Json::object()));
  EXPECT_FALSE(IsJobRunning(job(Json::array())));
  EXPECT_FALSE(IsJobRunning(job(Json::array({Condition("Created")}))));
  EXPECT_TRUE(IsJobRunning(job(Json::array({Condition("Created"), Condition("Running")}))));
  EXPECT_TRUE(IsJobRunning(job(Json::array({Condition("Running"), Condition("Restarting")}))));
  EXPECT_TRUE(
      IsJobRunning(job(Json::array({Condition("Running"), Condition("Suspended", "False")}))));
  EXPECT_FALSE(
      IsJobRunning(job(Json::array({Condition("Running", "False"), Condition("Succeeded")}))));
  EXPECT_FALSE(IsJobRunning(job(Json::array({Condition("Running"), Condition("Failed")}))));
  EXPECT_FALSE(IsJobRunning(Json{{"status", {{"conditions", "Running"}}}}));
  // A running job shown as Stalled or Unschedulable is still polled.
  EXPECT_TRUE(IsJobRunning(job(Json::array({Condition("Running"), Condition("Stalled")}))));
  EXPECT_TRUE(
      IsJobRunning(job(Json::array({Condition("Restarting"), Condition("Unschedulable")}))));
  EXPECT_FALSE(IsJobRunning(job(Json::array({Condition("Running"), Condition("Suspended")}))));
}

TEST(ProgressHelpersTest, MetricsUrlFromAnnotationsWithDefaults) {
  Json pod{{"status", {{"podIP", "10.1.2.3"}}}};
  EXPECT_EQ(MetricsUrl(pod), "http://10.1.2.3:8090/metrics");
  pod["metadata"]["annotations"] = {{"prometheus.io/port", "9100"},
                                    {"prometheus.io/path", "stats"}};
  EXPECT_EQ(MetricsUrl(pod), "http://10.1.2.3:9100/stats");
  pod["metadata"]["annotations"] = {{"prometheus.io/port", "http"}};
  EXPECT_EQ(MetricsUrl(pod), "http://10.1.2.3:8090/metrics");
  pod["status"]["podIP"] = "fd00::5";
  EXPECT_EQ(MetricsUrl(pod), "http://[fd00::5]:8090/metrics");
  EXPECT_EQ(MetricsUrl(Json::object()), "");
}

TEST(ProgressHelpersTest, ProgressFromMetricsMatchesTheReplicaLabels) {
  Json pod{{"metadata",
            {{"namespace", "ns"},
             {"labels",
              {{"kubetrain.io/replica-type", "chief"}, {"kubetrain.io/replica-index", "0"}}}}}};
  absl::StatusOr<PrometheusExposition> page = ParsePrometheusText(
      "kubetrain_global_step{training_job=\"j\",training_namespace=\"other\"} 1\n"
      "kubetrain_global_step{training_job=\"j\",replica_type=\"worker\"} 2\n"
      "kubetrain_global_step{training_job=\"j\",replica_type=\"chief\",replica_index=\"1\"} 3\n"
      "kubetrain_global_step{training_job=\"j\",training_namespace=\"ns\",replica_type=\"chief\","
      "replica_index=\"0\"} 4\n"
      "kubetrain_total_steps{training_job=\"k\"} 10\n"
      "kubetrain_train_loss{training_job=\"j\"} +Inf\n"
      "kubetrain_train_accuracy_ratio 0.5\n"
      "kubetrain_eval_accuracy_ratio{replica_type=\"evaluator\"} 0.9\n"
      "kubetrain_samples_per_second{phase=\"compute\"} 12\n");
  ASSERT_TRUE(page.ok()) << page.status();
  api::Progress progress = ProgressFromMetrics(*page, pod, "j");
  EXPECT_EQ(progress.step, 4);
  EXPECT_EQ(progress.total_steps, std::nullopt);
  EXPECT_EQ(progress.loss, std::nullopt);      // not finite: omitted
  EXPECT_EQ(progress.accuracy, 0.5);           // the evaluator's eval accuracy is not ours
  EXPECT_EQ(progress.samples_per_second, 12);  // other labels do not matter
  EXPECT_EQ(api::ProgressToJson(progress),
            (Json{{"step", 4}, {"accuracy", 0.5}, {"samplesPerSecond", 12.0}}));
  EXPECT_EQ(api::ProgressToJson(api::Progress{}), Json::object());
}

}  // namespace
}  // namespace kubetrain::controller
