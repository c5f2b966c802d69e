#include "operator/controller/training_job_controller.h"

#include <atomic>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "api/cluster_spec.h"
#include "operator/controller/cache_trim.h"
#include "operator/controller/event_recorder.h"
#include "operator/controller/expectations.h"
#include "operator/controller/job_status.h"
#include "operator/controller/node_loss.h"
#include "operator/controller/progress_poller.h"
#include "operator/controller/reconciler.h"
#include "operator/kube/api_error.h"
#include "operator/kube/informer.h"
#include "operator/kube/object.h"
#include "operator/kube/rate_limiter.h"
#include "operator/kube/resource.h"

namespace kubetrain::controller {
namespace {

constexpr char kComponent[] = "controller";

}  // namespace

struct TrainingJobController::Impl {
  kube::KubeClient& client;
  const ControllerOptions options;
  OperatorMetrics* const metrics;
  const Clock& clock;
  kube::Logger* const logger;

  std::unique_ptr<kube::Informer> jobs;
  std::unique_ptr<kube::Informer> pods;
  std::unique_ptr<kube::Informer> services;
  std::unique_ptr<kube::Informer> pod_groups;
  std::unique_ptr<kube::Informer> nodes;  // options.watch_nodes
  std::unique_ptr<kube::WorkQueue> queue;
  Expectations expectations;
  StoppedCheckpoints stopped_checkpoints;
  EventRecorder events;
  std::unique_ptr<Reconciler> reconciler;
  // After the reconciler: destroyed (threads joined) before it.
  std::unique_ptr<ActionRunner> runner;
  std::unique_ptr<MetricsFetcher> fetcher;
  // The progress poller's readings of running jobs, for Stalled.
  StallTracker stalls;
  std::unique_ptr<ProgressPoller> progress;
  std::vector<std::thread> workers;
  std::thread stats_thread;
  std::atomic<bool> ready{false};

  absl::Mutex mu;
  bool started ABSL_GUARDED_BY(mu) = false;
  bool stopping ABSL_GUARDED_BY(mu) = false;

  Impl(kube::KubeClient& c, ControllerOptions o, OperatorMetrics* m, const Clock& cl,
       kube::Logger* l)
      : client(c),
        options(std::move(o)),
        metrics(m),
        clock(cl),
        logger(l),
        expectations(cl),
        events(c, cl, l) {}

  std::vector<kube::Informer*> Informers() {
    std::vector<kube::Informer*> out = {jobs.get(), pods.get(), services.get()};
    if (pod_groups) out.push_back(pod_groups.get());
    if (nodes) out.push_back(nodes.get());
    return out;
  }

  // The job an owned object belongs to: namespace + job-name label, only
  // for objects a TrainingJob controls.
  static std::optional<std::string> OwnerKey(const kube::Json& obj) {
    std::string job = kube::Label(obj, api::kLabelJobName);
    if (job.empty() || !kube::ControllerUid(obj)) return std::nullopt;
    return kube::ObjectKey(kube::Namespace(obj), job);
  }

  void WatchOwned(kube::Informer& informer, bool pods_informer) {
    informer.AddHandlers(kube::InformerHandlers{
        [this, pods_informer](const kube::ObjectPtr& o) {
          if (auto key = OwnerKey(*o)) {
            expectations.CreationObserved(
                pods_informer ? PodExpectationKey(*key) : ServiceExpectationKey(*key),
                kube::Name(*o));
            queue->Add(*key);
          }
        },
        [this, pods_informer](const kube::ObjectPtr& old_obj, const kube::ObjectPtr& new_obj) {
          if (old_obj == new_obj) return;  // resync: the job informer covers it
          if (auto key = OwnerKey(*new_obj)) {
            if (pods_informer) stopped_checkpoints.Observe(*key, *new_obj);
            queue->Add(*key);
          }
        },
        [this, pods_informer](const kube::ObjectPtr& o) {
          if (auto key = OwnerKey(*o)) {
            if (pods_informer) {
              expectations.DeletionObserved(PodExpectationKey(*key), kube::Uid(*o));
              stopped_checkpoints.Observe(*key, *o);
            }
            queue->Add(*key);
          }
        }});
  }

  // A node whose readiness changed (or that is gone): every job with a pod
  // on it looks again (node_loss.h), and requeues itself for its timeout.
  void NodeChanged(const kube::Json* old_node, const kube::Json& node, bool deleted) {
    if (!deleted && old_node != nullptr && NodeReady(*old_node) == NodeReady(node)) return;
    const std::string name = kube::Name(node);
    std::set<std::string> keys;
    for (const kube::ObjectPtr& pod : pods->cache().List()) {
      if (kube::StringAt(*pod, {"spec", "nodeName"}) != name) continue;
      if (auto key = OwnerKey(*pod)) keys.insert(*key);
    }
    for (const std::string& key : keys) queue->Add(key);
  }

  void Work() {
    std::string key;
    while (queue->Get(&key)) {
      logger->Debug(kComponent, absl::StrCat("reconciling ", key));
      int64_t start = clock.NowNanos();
      absl::StatusOr<ReconcileResult> result = reconciler->Reconcile(key);
      double seconds = static_cast<double>(clock.NowNanos() - start) * 1e-9;
      metrics->ObserveReconcile(seconds, !result.ok());
      if (!result.ok()) {
        Retry(key, result.status());
      } else {
        // With requests still going out, their outcome decides (Acted).
        if (!result->acting) queue->Forget(key);
        if (result->requeue_after) queue->AddAfter(key, *result->requeue_after);
      }
      queue->Done(key);
    }
  }

  void Retry(const std::string& key, const absl::Status& status) {
    if (kube::IsConflict(status)) {
      // A stale cache: try again once the informer has caught up.
      logger->Debug(kComponent, absl::StrCat("reconcile ", key, ": ", status.message()));
    } else {
      logger->Warning(kComponent,
                      absl::StrCat("reconcile ", key, " failed (will retry): ", status.message()));
    }
    queue->AddRateLimited(key);
  }

  // The runner's callback: a pass's requests are done.
  void Acted(const std::string& key, const absl::Status& status, bool wanted) {
    if (!status.ok()) {
      Retry(key, status);
      return;
    }
    queue->Forget(key);
    if (wanted) queue->Add(key);  // a pass came while they went out
  }

  void Stats() {
    while (true) {
      {
        absl::MutexLock lock(&mu);
        auto stop = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu) { return stopping; };
        mu.AwaitWithTimeout(absl::Condition(&stop), absl::Seconds(2));
        if (stopping) return;
      }
      // No exception may leave a thread; statistics are not worth a crash.
      try {
        std::map<std::pair<std::string, std::string>, int> phases;
        for (const kube::ObjectPtr& job : jobs->cache().List()) {
          auto status_json = job->find("status");
          if (status_json == job->end()) continue;
          absl::StatusOr<api::JobStatus> status = api::StatusFromJson(*status_json);
          if (!status.ok()) continue;  // the reconciler reports it
          const std::string phase = api::Phase(*status);
          if (!phase.empty()) ++phases[{kube::Namespace(*job), phase}];
        }
        metrics->SetJobPhases(phases);
        metrics->SetQueueDepth(queue->Len());
      } catch (const std::exception& e) {
        logger->Warning(kComponent, absl::StrCat("job statistics: exception: ", e.what()));
      }
    }
  }
};

TrainingJobController::TrainingJobController(kube::KubeClient& client, ControllerOptions options,
                                             OperatorMetrics* metrics, const Clock& clock,
                                             kube::Logger* logger)
    : impl_(std::make_unique<Impl>(client, std::move(options), metrics, clock, logger)) {}

TrainingJobController::~TrainingJobController() { Stop(); }

absl::Status TrainingJobController::Start() {
  Impl& m = *impl_;
  // Start and Stop may race (a signal arrives while Start waits for the
  // informers). Everything Start builds or spawns happens under m.mu after
  // checking `stopping`, and Stop sets `stopping` under m.mu before it tears
  // down, so Stop sees either nothing or everything and nothing starts after.
  absl::MutexLock lock(&m.mu);
  if (m.stopping) return absl::CancelledError("controller stopped");
  if (m.started) return absl::FailedPreconditionError("controller already started");
  m.started = true;
  if (m.options.gang_scheduler != "" && m.options.gang_scheduler != "volcano") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown gang scheduler \"", m.options.gang_scheduler, "\""));
  }
  m.queue = std::make_unique<kube::WorkQueue>(kube::NewDefaultControllerRateLimiter(m.clock),
                                              m.clock, m.options.queue_observer);
  kube::InformerOptions job_options;
  job_options.namespace_name = m.options.watch_namespace;
  job_options.resync_period = m.options.resync_period;
  job_options.transform = kube::StripServerBookkeeping;
  kube::InformerOptions owned = job_options;
  owned.label_selector = api::kLabelJobName;  // exists: only kubetrain's objects
  owned.resync_period = absl::ZeroDuration();
  m.jobs = std::make_unique<kube::Informer>(m.client, kube::kTrainingJobs, job_options, m.clock,
                                            m.logger);
  // Pods and Services are cached with only the fields the controller reads
  // (cache_trim.h): most of a pod's JSON is its spec, which it never reads.
  kube::InformerOptions owned_pods = owned;
  owned_pods.transform = TrimCachedPod;
  kube::InformerOptions owned_services = owned;
  owned_services.transform = TrimCachedService;
  m.pods = std::make_unique<kube::Informer>(m.client, kube::kPods, owned_pods, m.clock, m.logger);
  m.services = std::make_unique<kube::Informer>(m.client, kube::kServices, owned_services, m.clock,
                                                m.logger);
  // No Secret informer: list/watch on Secrets would let the operator read
  // every Secret it can see. The token Secret is only created (reconciler.cc,
  // EnsureSecret).
  if (m.options.gang_scheduler == "volcano") {
    m.pod_groups =
        std::make_unique<kube::Informer>(m.client, kube::kPodGroups, owned, m.clock, m.logger);
  }

  if (m.options.watch_nodes) {
    kube::InformerOptions node_options;
    node_options.transform = TrimCachedNode;
    m.nodes =
        std::make_unique<kube::Informer>(m.client, kube::kNodes, node_options, m.clock, m.logger);
    m.nodes->AddHandlers(kube::InformerHandlers{
        [&m](const kube::ObjectPtr& o) { m.NodeChanged(nullptr, *o, false); },
        [&m](const kube::ObjectPtr& old_obj, const kube::ObjectPtr& o) {
          m.NodeChanged(old_obj.get(), *o, false);
        },
        [&m](const kube::ObjectPtr& o) { m.NodeChanged(nullptr, *o, true); }});
  }

  m.jobs->AddHandlers(kube::InformerHandlers{
      [&m](const kube::ObjectPtr& o) { m.queue->Add(kube::ObjectKey(*o)); },
      [&m](const kube::ObjectPtr&, const kube::ObjectPtr& o) { m.queue->Add(kube::ObjectKey(*o)); },
      [&m](const kube::ObjectPtr& o) { m.queue->Add(kube::ObjectKey(*o)); }});
  m.WatchOwned(*m.pods, /*pods_informer=*/true);
  m.WatchOwned(*m.services, /*pods_informer=*/false);

  ReconcilerDeps deps;
  deps.client = &m.client;
  deps.jobs = &m.jobs->cache();
  deps.pods = &m.pods->cache();
  deps.services = &m.services->cache();
  deps.pod_groups = m.pod_groups ? &m.pod_groups->cache() : nullptr;
  deps.nodes = m.nodes ? &m.nodes->cache() : nullptr;
  deps.expectations = &m.expectations;
  deps.stopped_checkpoints = &m.stopped_checkpoints;
  if (m.options.action_threads > 0) {
    m.runner = std::make_unique<ActionRunner>(
        m.options.action_threads,
        [&m](const std::string& key, const absl::Status& status, bool wanted) {
          m.Acted(key, status, wanted);
        },
        m.clock, m.options.action_observer);
    deps.runner = m.runner.get();
  }
  deps.events = &m.events;
  deps.metrics = m.metrics;
  deps.logger = m.logger;
  deps.clock = &m.clock;
  if (m.options.progress_interval > absl::ZeroDuration()) deps.stalls = &m.stalls;
  deps.build.gang_scheduler = m.options.gang_scheduler;
  deps.job_written = [&m](const kube::Json& job) { m.jobs->ObserveWrite(job); };
  m.reconciler = std::make_unique<Reconciler>(std::move(deps));

  for (kube::Informer* informer : m.Informers()) informer->Start();
  // Stop() during the wait stops the informers, which ends WaitForSync.
  const std::vector<kube::Informer*> informers = m.Informers();
  m.mu.Unlock();
  bool synced = true;
  kube::Informer* late = nullptr;
  for (kube::Informer* informer : informers) {
    if (!informer->WaitForSync(m.options.sync_timeout)) {
      synced = false;
      late = informer;
      break;
    }
  }
  m.mu.Lock();
  if (m.stopping) return absl::CancelledError("controller stopped while its informers synced");
  if (!synced) {
    // The informers keep running until Stop() (or the destructor) stops them.
    return absl::DeadlineExceededError(absl::StrCat("the ", late->type().plural,
                                                    " informer did not sync within ",
                                                    absl::FormatDuration(m.options.sync_timeout),
                                                    " (is the API reachable, is the CRD "
                                                    "installed, does RBAC allow list/watch?)"));
  }
  int workers = std::max(1, m.options.workers);
  for (int i = 0; i < workers; ++i) m.workers.emplace_back([&m] { m.Work(); });
  m.stats_thread = std::thread([&m] { m.Stats(); });
  if (m.options.progress_interval > absl::ZeroDuration()) {
    // A frozen replica's metrics never answer: a short timeout keeps one
    // from holding the round up.
    if (m.options.metrics_fetcher == nullptr) m.fetcher = NewCurlMetricsFetcher(absl::Seconds(2));
    ProgressPollerOptions progress_options;
    progress_options.interval = m.options.progress_interval;
    progress_options.stalls = &m.stalls;
    progress_options.clock = &m.clock;
    progress_options.on_stall_change = [&m](const std::string& key) { m.queue->Add(key); };
    progress_options.on_membership_change = [&m](const kube::Json& job,
                                                 const MembershipChange& change) {
      m.metrics->MembershipChanged(kube::Namespace(job));
      m.events.Record(job, kEventNormal, "MembershipChanged", MembershipChangedMessage(change));
    };
    m.progress = std::make_unique<ProgressPoller>(
        m.client, m.jobs->cache(), m.pods->cache(),
        m.options.metrics_fetcher != nullptr ? *m.options.metrics_fetcher : *m.fetcher,
        progress_options, m.logger);
    m.progress->Start();
  }
  m.ready = true;
  m.logger->Info(kComponent,
                 absl::StrCat("started ", workers, " workers; watching ",
                              m.options.watch_namespace.empty()
                                  ? std::string("all namespaces")
                                  : absl::StrCat("namespace ", m.options.watch_namespace)));
  return absl::OkStatus();
}

void TrainingJobController::Stop() {
  Impl& m = *impl_;
  {
    absl::MutexLock lock(&m.mu);
    if (m.stopping) return;
    // Also before Start(): a stopped controller never starts.
    m.stopping = true;
    if (!m.started) return;
  }
  m.ready = false;
  if (m.progress) m.progress->Stop();
  // Queued keys are dropped, not drained: with a backlog a drain would
  // outlast any grace period, and the next leader (or this one restarted)
  // reconciles every job again from its informers anyway (level-triggered).
  // Passes in progress finish.
  if (m.queue) m.queue->ShutDown();
  for (std::thread& t : m.workers) t.join();
  m.workers.clear();
  // The passes' requests still going out finish too (their callbacks find
  // the queue shut down).
  if (m.runner) m.runner->Stop();
  // The last passes' events are still queued: give them a moment to go out.
  if (!m.events.Flush(absl::Seconds(2))) {
    m.logger->Warning(kComponent, "stopped with events not yet posted");
  }
  if (m.stats_thread.joinable()) m.stats_thread.join();
  for (kube::Informer* informer : m.Informers()) {
    if (informer != nullptr) informer->Stop();
  }
  m.logger->Info(kComponent, "stopped");
}

bool TrainingJobController::Ready() const { return impl_->ready.load(); }

}  // namespace kubetrain::controller
