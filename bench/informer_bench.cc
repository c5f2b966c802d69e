// Informer throughput and cache memory with realistic Pods (see
// docs/benchmarks.md, "Informer: watch events into the cache").
//
//   1. decode+apply, no network: N ADDED then N MODIFIED watch lines fed
//      through a scripted HttpTransport into a kube::Informer, timed until
//      its handlers have seen every event; then the same lines through
//      DecodeWatchLine + ObjectCache::Upsert directly, on one thread.
//   2. memory per cached Pod: malloc'd bytes (mallinfo2) and RSS before and
//      after a cache is filled with N Pods, divided by N.
//   3. end to end against the in-process API emulator: an informer watches
//      while N Pods are created by several client threads (each with its own
//      connection); then a fresh informer's initial list of all N
//      (paginated ListAll, 500 per page) and a bare ListAll.
//
// Pods are built the way the operator builds them (controller::BuildPod for
// 1 PS + 3 Workers per job: labels, ownerReference, TF_CONFIG and the rest of
// the replica env, annotations) and completed with what the API server and
// kubelet add (uid, resourceVersion, default spec fields, the service-account
// volume, status with conditions and containerStatuses).
//
// Plain main:
//   kubetrain_informer_bench [--pods=10000] [--threads=8] [--no-emulator]
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/training_job.h"
#include "base/clock.h"
#include "operator/controller/replica_builder.h"
#include "operator/kube/informer.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/logger.h"
#include "operator/kube/object.h"
#include "operator/kube/object_cache.h"
#include "operator/kube/resource.h"
#include "testing/fake_http_transport.h"
#include "testing/kube_test_target.h"

namespace kubetrain {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// ---- memory ----

struct Mem {
  double heap = 0;  // malloc'd bytes in use: arenas + mmapped chunks
  double rss = 0;   // resident set
};

Mem Measure() {
  malloc_trim(0);
  struct mallinfo2 mi = mallinfo2();
  Mem m;
  m.heap = static_cast<double>(mi.uordblks + mi.hblkhd);
  long pages_total = 0, pages_resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2) pages_resident = 0;
    std::fclose(f);
  }
  m.rss = static_cast<double>(pages_resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
  return m;
}

// ---- realistic pods ----

Json MakeJob(const std::string& ns, const std::string& name, int index) {
  Json container{{"name", "kubetrain"},
                 {"image", "registry.example.com/ml/kubetrain:0.1.0"},
                 {"args", Json::array({"train", "--model=cnn", "--dataset=/data/fashion-mnist",
                                       "--epochs=20", "--batch-size=256"})},
                 {"resources",
                  {{"requests", {{"cpu", "2"}, {"memory", "4Gi"}}},
                   {"limits", {{"cpu", "4"}, {"memory", "8Gi"}}}}}};
  auto replica = [&](int n) {
    Json spec;
    spec["replicas"] = n;
    spec["template"]["spec"]["containers"] = Json::array({container});
    return spec;
  };
  Json job{{"apiVersion", api::kApiVersion},
           {"kind", "TrainingJob"},
           {"metadata",
            {{"name", name},
             {"namespace", ns},
             {"uid", absl::StrCat("6f1c2b9e-4d3a-4e8b-9c1d-", 100000000000 + index)}}},
           {"spec", {{"replicaSpecs", {{"PS", replica(1)}, {"Worker", replica(3)}}}}}};
  return job;
}

// What the API server, scheduler and kubelet add to a created pod.
void Complete(Json& pod, int64_t serial, int restarts) {
  Json& meta = pod["metadata"];
  meta["uid"] = absl::StrCat("a3e5c7d9-1b2f-4a6c-8e0d-", 200000000000 + serial);
  meta["resourceVersion"] = absl::StrCat(1000 + serial);
  meta["creationTimestamp"] = "2026-11-22T08:00:00Z";
  Json& spec = pod["spec"];
  spec["nodeName"] = absl::StrCat("node-", serial % 64, ".cluster.internal");
  spec["serviceAccountName"] = "default";
  spec["serviceAccount"] = "default";
  spec["dnsPolicy"] = "ClusterFirst";
  spec["schedulerName"] = "default-scheduler";
  spec["terminationGracePeriodSeconds"] = 30;
  spec["enableServiceLinks"] = true;
  spec["preemptionPolicy"] = "PreemptLowerPriority";
  spec["priority"] = 0;
  spec["securityContext"] = Json::object();
  spec["tolerations"] = Json::array({{{"key", "node.kubernetes.io/not-ready"},
                                      {"operator", "Exists"},
                                      {"effect", "NoExecute"},
                                      {"tolerationSeconds", 300}},
                                     {{"key", "node.kubernetes.io/unreachable"},
                                      {"operator", "Exists"},
                                      {"effect", "NoExecute"},
                                      {"tolerationSeconds", 300}}});
  spec["volumes"] = Json::array(
      {{{"name", "kube-api-access-x7k2p"},
        {"projected",
         {{"defaultMode", 420},
          {"sources",
           Json::array(
               {{{"serviceAccountToken", {{"expirationSeconds", 3607}, {"path", "token"}}}},
                {{"configMap",
                  {{"name", "kube-root-ca.crt"},
                   {"items", Json::array({{{"key", "ca.crt"}, {"path", "ca.crt"}}})}}}},
                {{"downwardAPI",
                  {{"items", Json::array({{{"path", "namespace"},
                                           {"fieldRef",
                                            {{"apiVersion", "v1"},
                                             {"fieldPath", "metadata.namespace"}}}}})}}}}})}}}}});
  for (Json& c : spec["containers"]) {
    c["imagePullPolicy"] = "IfNotPresent";
    c["terminationMessagePath"] = "/dev/termination-log";
    c["terminationMessagePolicy"] = "File";
    c["volumeMounts"] =
        Json::array({{{"name", "kube-api-access-x7k2p"},
                      {"readOnly", true},
                      {"mountPath", "/var/run/secrets/kubernetes.io/serviceaccount"}}});
  }
  auto cond = [](const char* type) {
    return Json{{"type", type},
                {"status", "True"},
                {"lastProbeTime", nullptr},
                {"lastTransitionTime", "2026-11-22T08:00:03Z"}};
  };
  std::string ip = absl::StrCat("10.244.", serial / 250 % 250, ".", serial % 250 + 2);
  pod["status"] = {
      {"phase", "Running"},
      {"conditions", Json::array({cond("Initialized"), cond("Ready"), cond("ContainersReady"),
                                  cond("PodScheduled")})},
      {"hostIP", absl::StrCat("192.168.1.", serial % 64 + 10)},
      {"podIP", ip},
      {"podIPs", Json::array({{{"ip", ip}}})},
      {"startTime", "2026-11-22T08:00:01Z"},
      {"qosClass", "Burstable"},
      {"containerStatuses",
       Json::array({{{"name", "kubetrain"},
                     {"state", {{"running", {{"startedAt", "2026-11-22T08:00:02Z"}}}}},
                     {"lastState", Json::object()},
                     {"ready", true},
                     {"restartCount", restarts},
                     {"image", "registry.example.com/ml/kubetrain:0.1.0"},
                     {"imageID",
                      "registry.example.com/ml/kubetrain@sha256:"
                      "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
                     {"containerID", absl::StrCat("containerd://5e8f1c0a9b7d", 100000000 + serial,
                                                  "c2d4e6f8a0b1c3d5e7f9")},
                     {"started", true}}})}};
}

// `n` pods as the operator creates them (before the server's additions).
std::vector<Json> OperatorPods(const std::string& ns, int n) {
  std::vector<Json> pods;
  pods.reserve(n);
  for (int j = 0; static_cast<int>(pods.size()) < n; ++j) {
    Json job_json = MakeJob(ns, absl::StrCat("mnist-", j), j);
    absl::StatusOr<api::TrainingJob> job = api::FromJson(job_json);
    if (!job.ok()) {
      std::cerr << "job: " << job.status() << "\n";
      std::exit(1);
    }
    api::ApplyDefaults(*job);
    pods.push_back(controller::BuildPod(*job, job_json, api::ReplicaType::kPS, 0, {}));
    for (int i = 0; i < 3 && static_cast<int>(pods.size()) < n; ++i) {
      pods.push_back(controller::BuildPod(*job, job_json, api::ReplicaType::kWorker, i, {}));
    }
  }
  return pods;
}

// ---- a scripted watch: the lines, then blocks until cancelled ----

class BlockingStream final : public kube::HttpStream {
 public:
  explicit BlockingStream(const std::vector<std::string>* lines) : lines_(lines) {}
  absl::StatusOr<bool> ReadLine(std::string* line) override {
    if (lines_ != nullptr && next_ < lines_->size()) {
      *line = (*lines_)[next_++];  // the lines stay allocated: memory is measured around them
      return true;
    }
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&cancelled_));
    return absl::CancelledError("watch cancelled");
  }
  void Cancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
  }

 private:
  const std::vector<std::string>* lines_;
  size_t next_ = 0;
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

struct Counter {
  std::atomic<int64_t> adds{0}, updates{0};
  std::atomic<int64_t> add_done_ns{0}, update_done_ns{0};
};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

bool WaitUntil(const std::function<bool()>& done, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

void Fmt(const char* label, double value, const char* unit) {
  std::printf("  %-52s %12.1f %s\n", label, value, unit);
}

// ---- 1 + 2: no network ----

void RunDecodeApply(int n) {
  std::printf("== decode + apply, scripted transport (no network), %d pods ==\n", n);
  std::vector<Json> pods = OperatorPods("bench", n);
  std::vector<std::string> lines;
  lines.reserve(2 * n);
  double text_bytes = 0;
  for (int i = 0; i < n; ++i) {
    Json pod = pods[i];
    Complete(pod, i, 0);
    std::string text = pod.dump();
    text_bytes += static_cast<double>(text.size());
    lines.push_back(absl::StrCat(R"({"type":"ADDED","object":)", text, "}"));
  }
  for (int i = 0; i < n; ++i) {
    Json pod = pods[i];
    Complete(pod, n + i, 1);  // new resourceVersion, restartCount 1
    lines.push_back(absl::StrCat(R"({"type":"MODIFIED","object":)", pod.dump(), "}"));
  }
  pods.clear();
  pods.shrink_to_fit();
  std::printf("  pod JSON text (compact dump), mean %.0f bytes\n", text_bytes / n);

  // -- through a kube::Informer --
  {
    auto fake = std::make_unique<kube::FakeHttpTransport>();
    fake->OnSend([](const kube::HttpRequest&) -> absl::StatusOr<kube::HttpResponse> {
      return kube::HttpResponse{
          200,
          R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]})",
          ""};
    });
    std::atomic<int> streams{0};
    fake->OnStream([&](const kube::HttpRequest&) -> absl::StatusOr<kube::StreamResponse> {
      kube::StreamResponse r;
      r.status = 200;
      r.stream = std::make_unique<BlockingStream>(streams++ == 0 ? &lines : nullptr);
      return r;
    });
    kube::KubeClient client(std::move(fake));
    kube::StreamLogger logger(std::cerr, kube::StreamLogger::Format::kText,
                              kube::LogLevel::kWarning);
    Counter c;
    Mem before = Measure();
    RealClock clock;
    kube::Informer informer(client, kube::kPods, {}, clock, &logger);
    informer.AddHandlers({[&](const kube::ObjectPtr&) {
                            if (++c.adds == n) c.add_done_ns = NowNs();
                          },
                          [&](const kube::ObjectPtr&, const kube::ObjectPtr&) {
                            if (++c.updates == n) c.update_done_ns = NowNs();
                          },
                          nullptr});
    int64_t t0 = NowNs();
    informer.Start();
    if (!WaitUntil([&] { return c.updates.load() == n; }, absl::Seconds(300))) {
      std::printf("  TIMEOUT: %lld adds, %lld updates\n", static_cast<long long>(c.adds.load()),
                  static_cast<long long>(c.updates.load()));
      std::exit(1);
    }
    Mem after = Measure();
    double add_s = (c.add_done_ns - t0) * 1e-9;
    double upd_s = (c.update_done_ns - c.add_done_ns) * 1e-9;
    std::printf("  kube::Informer (list of 0, then one watch stream; handlers count):\n");
    Fmt("ADDED events/s (until the last add handler)", n / add_s, "events/s");
    Fmt("MODIFIED events/s", n / upd_s, "events/s");
    Fmt("all events/s", 2.0 * n / (add_s + upd_s), "events/s");
    Fmt("cache size", static_cast<double>(informer.cache().Size()), "objects");
    Fmt("malloc'd bytes per cached pod (informer, mallinfo2)", (after.heap - before.heap) / n,
        "bytes");
    Fmt("RSS per cached pod (informer, /proc/self/statm)", (after.rss - before.rss) / n, "bytes");
    informer.Stop();
  }

  // -- DecodeWatchLine + ObjectCache::Upsert directly, one thread --
  {
    std::vector<kube::WatchEvent> events(lines.size());
    auto t0 = Clock::now();
    for (size_t i = 0; i < lines.size(); ++i) {
      absl::StatusOr<kube::WatchEvent> e = kube::DecodeWatchLine(lines[i]);
      if (!e.ok()) {
        std::cerr << e.status() << "\n";
        std::exit(1);
      }
      events[i] = *std::move(e);
    }
    auto t1 = Clock::now();
    kube::ObjectCache cache;
    for (kube::WatchEvent& e : events) {
      cache.Upsert(std::make_shared<const Json>(std::move(e.object)));
    }
    auto t2 = Clock::now();
    double decode_s = Seconds(t0, t1), upsert_s = Seconds(t1, t2);
    std::printf("  DecodeWatchLine + ObjectCache::Upsert, one thread, %zu events:\n", lines.size());
    Fmt("DecodeWatchLine", decode_s / lines.size() * 1e6, "us/event");
    Fmt("ObjectCache::Upsert (3 default indexes)", upsert_s / lines.size() * 1e6, "us/event");
    Fmt("decode + upsert", lines.size() / (decode_s + upsert_s), "events/s");
    Fmt("JSON parse rate", text_bytes * 2 / decode_s / 1e6, "MB/s");
  }

  // -- memory: a fresh cache filled with the N ADDED objects --
  {
    Mem before = Measure();
    auto cache = std::make_unique<kube::ObjectCache>();
    for (int i = 0; i < n; ++i) {
      absl::StatusOr<kube::WatchEvent> e = kube::DecodeWatchLine(lines[i]);
      cache->Upsert(std::make_shared<const Json>(std::move(e->object)));
    }
    Mem after = Measure();
    std::printf("  memory, ObjectCache holding %d pods (decoded, no informer):\n", n);
    Fmt("malloc'd bytes per pod (mallinfo2, after malloc_trim)", (after.heap - before.heap) / n,
        "bytes");
    Fmt("RSS per pod (/proc/self/statm, after malloc_trim)", (after.rss - before.rss) / n, "bytes");
    Fmt("JSON text per pod", text_bytes / n, "bytes");
    Fmt("malloc'd bytes / JSON text bytes", (after.heap - before.heap) / text_bytes, "x");
    double with_cache = after.heap;
    cache.reset();
    // Cost of the json tree alone (no cache, no indexes, no shared_ptr).
    std::vector<Json> trees;
    trees.reserve(n);
    Mem b2 = Measure();
    for (int i = 0; i < n; ++i) trees.push_back(kube::DecodeWatchLine(lines[i])->object);
    Mem a2 = Measure();
    Fmt("of which the nlohmann::json tree alone", (a2.heap - b2.heap) / n, "bytes");
    (void)with_cache;
  }
}

// ---- 3: against the API emulator ----

void RunEmulator(int n, int threads) {
  std::printf(
      "== end to end, in-process API emulator over HTTP/1.1 (cpprestsdk), %d pods, %d "
      "creating threads ==\n",
      n, threads);
  absl::StatusOr<std::unique_ptr<testing::KubeTestTarget>> target =
      testing::KubeTestTarget::Create();
  if (!target.ok()) {
    std::cerr << "emulator: " << target.status() << "\n";
    std::exit(1);
  }
  const std::string ns = (*target)->ns();
  std::vector<Json> pods = OperatorPods(ns, n);
  // The owning TrainingJobs must exist, or the emulator's garbage collector
  // deletes the pods: create them (untimed) and point the pods at their uids.
  {
    kube::KubeClient& client = (*target)->client();
    std::string job_name, job_uid;
    for (Json& pod : pods) {
      Json& ref = pod["metadata"]["ownerReferences"][0];
      if (ref["name"] != job_name) {
        job_name = ref["name"];
        Json job = MakeJob(ns, job_name, 0);
        job["metadata"].erase("uid");
        absl::StatusOr<Json> created = client.Create(kube::kTrainingJobs, ns, job);
        if (!created.ok()) {
          std::cerr << "job: " << created.status() << "\n";
          std::exit(1);
        }
        job_uid = kube::Uid(*created);
      }
      ref["uid"] = job_uid;
    }
  }

  kube::StreamLogger logger(std::cerr, kube::StreamLogger::Format::kText, kube::LogLevel::kWarning);
  auto informer_client = (*target)->NewClient();
  kube::InformerOptions options;
  options.namespace_name = ns;
  RealClock clock;
  kube::Informer informer(**informer_client, kube::kPods, options, clock, &logger);
  std::atomic<int64_t> adds{0};
  std::atomic<int64_t> done_ns{0};
  informer.AddHandlers({[&](const kube::ObjectPtr&) {
                          if (++adds == n) done_ns = NowNs();
                        },
                        nullptr, nullptr});
  informer.Start();
  if (!informer.WaitForSync(absl::Seconds(30))) {
    std::cerr << "informer did not sync\n";
    std::exit(1);
  }

  std::vector<std::unique_ptr<kube::KubeClient>> clients;
  for (int t = 0; t < threads; ++t) clients.push_back(*(*target)->NewClient());
  std::atomic<int> errors{0};
  int64_t t0 = NowNs();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = t; i < n; i += threads) {
        if (!clients[t]->Create(kube::kPods, ns, pods[i]).ok()) ++errors;
      }
    });
  }
  for (std::thread& w : workers) w.join();
  int64_t t_created = NowNs();
  if (!WaitUntil([&] { return adds.load() == n; }, absl::Seconds(300))) {
    std::printf("  TIMEOUT: %lld of %d in the cache\n", static_cast<long long>(adds.load()), n);
    std::exit(1);
  }
  double create_s = (t_created - t0) * 1e-9, cached_s = (done_ns - t0) * 1e-9;
  double stored_bytes = 0;
  for (const kube::ObjectPtr& p : informer.cache().List()) stored_bytes += p->dump().size();
  std::printf(
      "  stored pod JSON (as the emulator returns it: status reset to Pending), mean "
      "%.0f bytes; create errors: %d\n",
      stored_bytes / n, errors.load());
  Fmt("creates/s (all threads, until the last create answered)", n / create_s, "pods/s");
  Fmt("first create -> all in the informer's cache", cached_s, "s");
  Fmt("cache fill rate", n / cached_s, "events/s");
  Fmt("lag of the cache after the last create", (done_ns - t_created) * 1e-9 * 1e3, "ms");
  informer.Stop();

  // Initial list by a fresh informer (what an operator restart costs).
  auto list_client = (*target)->NewClient();
  for (int round = 0; round < 3; ++round) {
    kube::Informer fresh(**list_client, kube::kPods, options, clock, &logger);
    auto a = Clock::now();
    fresh.Start();
    if (!fresh.WaitForSync(absl::Seconds(120))) {
      std::cerr << "fresh informer did not sync\n";
      std::exit(1);
    }
    auto b = Clock::now();
    std::printf("  %-52s %12.3f s  (%zu objects, %.0f objects/s)\n",
                absl::StrCat("informer initial list, round ", round + 1).c_str(), Seconds(a, b),
                fresh.cache().Size(), fresh.cache().Size() / Seconds(a, b));
    fresh.Stop();
  }
  for (int round = 0; round < 3; ++round) {
    auto a = Clock::now();
    absl::StatusOr<kube::ObjectList> list = (*list_client)->ListAll(kube::kPods, ns, {}, 500);
    auto b = Clock::now();
    std::printf("  %-52s %12.3f s  (%zu objects)\n",
                absl::StrCat("bare ListAll, 500 per page, round ", round + 1).c_str(),
                Seconds(a, b), list.ok() ? list->items.size() : 0);
  }
}

}  // namespace
}  // namespace kubetrain

int main(int argc, char** argv) {
  int pods = 10000, threads = 8;
  bool emulator = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--pods=", 0) == 0) {
      pods = std::atoi(a.c_str() + 7);
    } else if (a.rfind("--threads=", 0) == 0) {
      threads = std::atoi(a.c_str() + 10);
    } else if (a == "--no-emulator") {
      emulator = false;
    } else {
      std::fprintf(stderr, "usage: %s [--pods=10000] [--threads=8] [--no-emulator]\n", argv[0]);
      return 2;
    }
  }
  std::printf("kubetrain_informer_bench --pods=%d --threads=%d%s (nproc %u)\n", pods, threads,
              emulator ? "" : " --no-emulator", std::thread::hardware_concurrency());
  kubetrain::RunDecodeApply(pods);
  if (emulator) kubetrain::RunEmulator(pods, threads);
  return 0;
}
