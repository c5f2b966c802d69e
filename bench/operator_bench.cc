// TrainingJob controller under a burst of jobs (see docs/benchmarks.md,
// "Operator: 500 TrainingJobs at once").
//
// An in-process API emulator; a TrainingJobController (its own client, the
// real informers, queue and reconciler) in the same process; then --jobs
// TrainingJobs of 1 PS + 3 Workers are created at once by --create-threads
// client threads. Measured: time from the first create until the controller
// has created every pod (OperatorMetrics::PodCreated, checked with a ListAll
// at the end), reconcile latency percentiles (ObserveReconcile), and memory:
//   - process peak RSS (VmHWM) minus the RSS right after the emulator started
//     (this includes the emulator's own growth: it holds every object too);
//   - malloc'd bytes held by the controller: heap in use once the burst has
//     settled minus heap in use after the controller and its client are
//     destroyed (the emulator still holding the same objects);
//   - the emulator's share: heap after the controller is gone minus the
//     baseline.
// With --operator-binary=PATH the same burst is also run against the real
// kubetrain-operator in its own process (kubeconfig pointing at the
// emulator), whose VmHWM is the clean operator RSS; completion there is the
// emulator's count of pod POSTs, checked with a ListAll.
//
// Each --workers value runs in a child process of its own so that peak RSS
// is per configuration.
//
//   kubetrain_operator_bench [--jobs=500] [--workers=4,16] [--create-threads=8]
//                            [--operator-binary=build/operator/kubetrain-operator]
//
// --real-cluster: against the API server KUBETRAIN_TEST_KUBECONFIG names
// instead (bench/operator_real_cluster.h): the controller in process with a
// counted, throttled client (--kube-api-qps, --kube-api-burst; API requests
// and status writes per job, queue wait, reconcile mean/p99), then
// kube-controller-manager's Job controller creating as many pods on the same
// server, then, with --operator-binary, the real binary for its peak RSS.
// --service-mode=PerJob runs jobs with one Service each; --no-job-controller
// skips the Job controller, --no-in-process our in-process controller;
// --keep-namespaces leaves the runs' namespaces on the server (deleting
// thousands of pods takes minutes); --binary-without-rate-limit runs an --operator-binary built
// before the rate-limit flags (for before/after figures); --kcm-rate-limit=TEXT says what the
// controller-manager was started with (KCM_EXTRA), for the report.
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/training_job.h"
#include "base/clock.h"
#include "bench/create_all.h"
#include "bench/operator_real_cluster.h"
#include "bench/recording_metrics.h"
#include "operator/controller/operator_metrics.h"
#include "operator/controller/training_job_controller.h"
#include "operator/kube/kube_client.h"
#include "operator/kube/logger.h"
#include "operator/kube/resource.h"
#include "testing/kube_test_target.h"

namespace kubetrain {
namespace {

using bench::Percentile;
using bench::RecordingMetrics;

using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

double Since(SteadyClock::time_point a) {
  return std::chrono::duration<double>(SteadyClock::now() - a).count();
}

struct Flags {
  int jobs = 500;
  std::vector<int> workers = {4, 16};
  int create_threads = 8;
  std::string operator_binary;
};

// ---- memory ----

double HeapInUse() {
  malloc_trim(0);
  struct mallinfo2 mi = mallinfo2();
  return static_cast<double>(mi.uordblks + mi.hblkhd);
}

// A "VmRSS:"-style field of /proc/<pid>/status, in bytes.
double ProcStatusBytes(const std::string& pid, const std::string& field) {
  std::ifstream in("/proc/" + pid + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      return std::strtod(line.c_str() + field.size() + 1, nullptr) * 1024;
    }
  }
  return 0;
}

double MiB(double bytes) { return bytes / (1024.0 * 1024.0); }

// ---- jobs ----

Json MakeJob(const std::string& ns, int index) {
  Json container{{"name", "kubetrain"},
                 {"image", "registry.example.com/ml/kubetrain:0.1.0"},
                 {"args", Json::array({"train", "--model=mlp", "--epochs=5"})}};
  auto replica = [&](int n) {
    Json spec;
    spec["replicas"] = n;
    spec["template"]["spec"]["containers"] = Json::array({container});
    return spec;
  };
  return Json{{"apiVersion", kubetrain::api::kApiVersion},
              {"kind", "TrainingJob"},
              {"metadata", {{"name", absl::StrCat("job-", index)}, {"namespace", ns}}},
              {"spec", {{"replicaSpecs", {{"PS", replica(1)}, {"Worker", replica(3)}}}}}};
}

// Creates every job from `threads` clients at once. Returns create errors.
int CreateJobs(testing::KubeTestTarget& target, int jobs, int threads) {
  return bench::CreateAll(target, kube::kTrainingJobs, jobs, threads,
                          [&](int i) { return MakeJob(target.ns(), i); });
}

size_t CountPods(testing::KubeTestTarget& target) {
  absl::StatusOr<kube::ObjectList> list = target.client().ListAll(kube::kPods, target.ns());
  return list.ok() ? list->items.size() : 0;
}

bool WaitUntil(const std::function<bool()>& done, absl::Duration timeout,
               absl::Duration poll = absl::Milliseconds(2)) {
  absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(poll);
  }
  return true;
}

// ---- in process ----

int RunInProcess(const Flags& flags, int workers) {
  const int want = flags.jobs * 4;
  absl::StatusOr<std::unique_ptr<testing::KubeTestTarget>> target =
      testing::KubeTestTarget::Create();
  if (!target.ok()) {
    std::cerr << "emulator: " << target.status() << "\n";
    return 1;
  }
  const double rss0 = ProcStatusBytes("self", "VmRSS");
  const double heap0 = HeapInUse();

  RecordingMetrics metrics;
  RealClock clock;
  kube::StreamLogger logger(std::cerr, kube::StreamLogger::Format::kText, kube::LogLevel::kError);
  auto client = (*target)->NewClient();
  controller::ControllerOptions options;
  options.watch_namespace = (*target)->ns();
  options.workers = workers;
  auto ctrl = std::make_unique<controller::TrainingJobController>(**client, options, &metrics,
                                                                  clock, &logger);
  if (absl::Status s = ctrl->Start(); !s.ok()) {
    std::cerr << "controller: " << s << "\n";
    return 1;
  }
  const double heap_idle = HeapInUse();

  auto t0 = SteadyClock::now();
  int errors = CreateJobs(**target, flags.jobs, flags.create_threads);
  double jobs_s = Since(t0);
  bool all = WaitUntil([&] { return metrics.pods() >= want; }, absl::Minutes(10));
  double pods_s = Since(t0);
  // Let the queue drain (status updates, the events of the last pods).
  WaitUntil([&] { return metrics.SecondsSinceLastReconcile() > 2.0; }, absl::Seconds(60),
            absl::Milliseconds(100));
  double settled_s = Since(t0) - 2.0;
  const double heap_settled = HeapInUse();
  const double rss_settled = ProcStatusBytes("self", "VmRSS");
  const size_t listed = CountPods(**target);

  int reconcile_errors = 0;
  std::vector<double> lat = metrics.Latencies(&reconcile_errors);
  ctrl->Stop();
  ctrl.reset();
  client->reset();
  const double heap_emulator_only = HeapInUse();
  const double hwm = ProcStatusBytes("self", "VmHWM");

  std::printf("in-process controller, --workers=%d, %d jobs x (1 PS + 3 Workers):\n", workers,
              flags.jobs);
  std::printf("  job creates: %.2f s for %d jobs (%d errors, %d client threads)\n", jobs_s,
              flags.jobs, errors, flags.create_threads);
  std::printf(
      "  first job create -> all %d pods created: %.2f s%s (%.0f pods/s); pods listed: "
      "%zu\n",
      want, pods_s, all ? "" : " (TIMEOUT)", want / pods_s, listed);
  std::printf("  queue drained (last reconcile) after: %.2f s\n", settled_s);
  std::printf(
      "  reconciles: %zu (%d errors); latency p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, "
      "max %.2f ms\n",
      lat.size(), reconcile_errors, Percentile(lat, 0.5) * 1e3, Percentile(lat, 0.9) * 1e3,
      Percentile(lat, 0.99) * 1e3, Percentile(lat, 1.0) * 1e3);
  std::printf(
      "  RSS: baseline after emulator start %.1f MiB; settled %.1f MiB; peak (VmHWM) "
      "%.1f MiB; peak - baseline %.1f MiB (operator + emulator + bench clients)\n",
      MiB(rss0), MiB(rss_settled), MiB(hwm), MiB(hwm - rss0));
  std::printf(
      "  heap in use (mallinfo2): controller started, idle +%.1f MiB; controller's "
      "share once settled %.1f MiB; emulator's share (objects stored) %.1f MiB\n",
      MiB(heap_idle - heap0), MiB(heap_settled - heap_emulator_only),
      MiB(heap_emulator_only - heap0));
  std::fflush(stdout);
  return all && listed == static_cast<size_t>(want) ? 0 : 1;
}

// ---- the real kubetrain-operator binary ----

int RunExternal(const Flags& flags, int workers) {
  const int want = flags.jobs * 4;
  absl::StatusOr<std::unique_ptr<testing::KubeTestTarget>> target =
      testing::KubeTestTarget::Create();
  if (!target.ok() || (*target)->emulator() == nullptr) {
    std::cerr << "needs the emulator\n";
    return 1;
  }
  testing::KubeEmulator& emulator = *(*target)->emulator();
  char dir_template[] = "/tmp/kubetrain-operator-bench-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return 1;
  const std::string kubeconfig = absl::StrCat(dir_template, "/kubeconfig");
  {
    std::ofstream out(kubeconfig);
    out << "apiVersion: v1\nkind: Config\nclusters:\n- name: emu\n  cluster:\n    server: "
        << emulator.Url() << "\ncontexts:\n- name: emu\n  context:\n    cluster: emu\n    user: "
        << "emu\n    namespace: " << (*target)->ns()
        << "\ncurrent-context: emu\nusers:\n- name: emu\n  user: {}\n";
  }
  const std::string workers_flag = absl::StrCat("--workers=", workers);
  pid_t pid = fork();
  if (pid == 0) {
    int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) ::dup2(null, 2);
    std::string ns = (*target)->ns();
    execl(flags.operator_binary.c_str(), flags.operator_binary.c_str(), "--kubeconfig",
          kubeconfig.c_str(), "--leader-elect=false", "--metrics-bind-address", "127.0.0.1:0",
          "--health-probe-bind-address", "127.0.0.1:0", "--webhook-bind-address", "0",
          "--namespace", ns.c_str(), workers_flag.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const std::string spid = std::to_string(pid);
  // Ready: its informers (jobs, pods, services, secrets ...) are watching.
  bool up = WaitUntil([&] { return emulator.OpenWatches() >= 3; }, absl::Seconds(30),
                      absl::Milliseconds(20));
  absl::SleepFor(absl::Milliseconds(500));
  const double rss_idle = ProcStatusBytes(spid, "VmRSS");
  auto pod_posts = [&] { return emulator.RequestCount("POST", "/pods"); };
  auto t0 = SteadyClock::now();
  int errors = CreateJobs(**target, flags.jobs, flags.create_threads);
  double jobs_s = Since(t0);
  bool all = up && WaitUntil([&] { return pod_posts() >= want; }, absl::Minutes(10));
  double pods_s = Since(t0);
  // Settled: no request to the emulator for 2 s.
  int last = -1;
  WaitUntil(
      [&] {
        int now = emulator.RequestCount("", "");
        bool quiet = now == last;
        last = now;
        return quiet;
      },
      absl::Seconds(60), absl::Seconds(2));
  const size_t listed = CountPods(**target);
  const double rss = ProcStatusBytes(spid, "VmRSS");
  const double hwm = ProcStatusBytes(spid, "VmHWM");
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  std::remove(kubeconfig.c_str());
  rmdir(dir_template);
  std::printf("kubetrain-operator process (%s), --workers=%d, %d jobs:\n",
              flags.operator_binary.c_str(), workers, flags.jobs);
  std::printf(
      "  job creates: %.2f s (%d errors); first job create -> %d pod POSTs: %.2f s%s "
      "(%.0f pods/s); pods listed: %zu\n",
      jobs_s, errors, want, pods_s, all ? "" : " (TIMEOUT)", want / pods_s, listed);
  std::printf(
      "  operator RSS: idle (synced, no jobs) %.1f MiB; settled %.1f MiB; peak (VmHWM) "
      "%.1f MiB\n",
      MiB(rss_idle), MiB(rss), MiB(hwm));
  std::fflush(stdout);
  return all && listed == static_cast<size_t>(want) ? 0 : 1;
}

}  // namespace
}  // namespace kubetrain

int main(int argc, char** argv) {
  kubetrain::Flags flags;
  kubetrain::bench::RealClusterOptions real;
  bool real_cluster = false;
  bool child = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      size_t n = std::strlen(name);
      return a.compare(0, n, name) == 0 ? a.c_str() + n : nullptr;
    };
    if (const char* v = value("--jobs=")) {
      flags.jobs = std::atoi(v);
    } else if (const char* v = value("--workers=")) {
      flags.workers.clear();
      for (absl::string_view w : absl::StrSplit(v, ',')) {
        int n = 0;
        if (absl::SimpleAtoi(w, &n)) flags.workers.push_back(n);
      }
    } else if (const char* v = value("--create-threads=")) {
      flags.create_threads = std::atoi(v);
    } else if (const char* v = value("--operator-binary=")) {
      flags.operator_binary = v;
    } else if (a == "--child") {
      child = true;
    } else if (a == "--real-cluster") {
      real_cluster = true;
    } else if (const char* v = value("--kube-api-qps=")) {
      real.throttle.qps = std::atof(v);
    } else if (const char* v = value("--kube-api-burst=")) {
      real.throttle.burst = std::atoi(v);
    } else if (const char* v = value("--action-threads=")) {
      real.action_threads.clear();
      for (absl::string_view t : absl::StrSplit(v, ',')) {
        int n = 0;
        if (absl::SimpleAtoi(t, &n)) real.action_threads.push_back(n);
      }
    } else if (const char* v = value("--service-mode=")) {
      real.service_mode = v;
    } else if (a == "--no-job-controller") {
      real.job_controller = false;
    } else if (a == "--keep-namespaces") {
      real.keep_namespaces = true;
    } else if (a == "--no-in-process") {
      real.in_process = false;
    } else if (a == "--binary-without-rate-limit") {
      real.binary_without_rate_limit = true;
    } else if (a == "--binary-first") {
      real.binary_first = true;
    } else if (const char* v = value("--kcm-rate-limit=")) {
      real.kcm_rate_limit = v;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--jobs=500] [--workers=4,16] [--create-threads=8] "
                   "[--operator-binary=PATH] [--real-cluster [--kube-api-qps=20] "
                   "[--kube-api-burst=30] [--action-threads=16] "
                   "[--service-mode=PerReplica|PerJob] "
                   "[--no-job-controller] [--no-in-process] [--binary-without-rate-limit] "
                   "[--binary-first] "
                   "[--keep-namespaces] "
                   "[--kcm-rate-limit=TEXT]]\n",
                   argv[0]);
      return 2;
    }
  }
  if (real_cluster) {
    if (absl::Status s = kubetrain::kube::ValidateThrottleOptions(real.throttle); !s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 2;
    }
    real.jobs = flags.jobs;
    real.create_threads = flags.create_threads;
    real.operator_binary = flags.operator_binary;
    real.workers = flags.workers;
    return kubetrain::bench::RunRealCluster(real);
  }
  if (child) {
    int rc = kubetrain::RunInProcess(flags, flags.workers.at(0));
    if (!flags.operator_binary.empty()) rc |= kubetrain::RunExternal(flags, flags.workers.at(0));
    return rc;
  }
  std::printf("kubetrain_operator_bench --jobs=%d --create-threads=%d (nproc %u)\n", flags.jobs,
              flags.create_threads, std::thread::hardware_concurrency());
  std::fflush(stdout);
  int rc = 0;
  for (int w : flags.workers) {
    std::string cmd = absl::StrCat("'/proc/", getpid(), "/exe' --child --jobs=", flags.jobs,
                                   " --workers=", w, " --create-threads=", flags.create_threads);
    if (!flags.operator_binary.empty()) {
      absl::StrAppend(&cmd, " '--operator-binary=", flags.operator_binary, "'");
    }
    int status = std::system(cmd.c_str());
    if (status != 0) rc = 1;
  }
  return rc;
}
