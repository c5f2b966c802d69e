#include "operator/controller/reconciler.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "api/cluster_spec.h"
#include "api/job_status.h"
#include "api/replica_policy.h"
#include "api/training_job.h"
#include "operator/controller/elastic_workers.h"
#include "operator/controller/failed_replicas.h"
#include "operator/controller/failure_policy.h"
#include "operator/controller/job_objects.h"
#include "operator/controller/job_phase.h"
#include "operator/controller/job_status.h"
#include "operator/controller/node_loss.h"
#include "operator/controller/pod_planner.h"
#include "operator/controller/pod_status.h"
#include "operator/controller/scheduling_check.h"
#include "operator/controller/service_planner.h"
#include "operator/controller/slow_start.h"
#include "operator/controller/status_planner.h"
#include "operator/kube/api_error.h"
#include "operator/kube/object.h"

namespace kubetrain::controller {
namespace {

using api::ReplicaType;
using kube::ObjectPtr;

constexpr char kComponent[] = "reconciler";

std::string RandomToken() {
  absl::BitGen gen;
  return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(gen), absl::Uniform<uint64_t>(gen));
}

}  // namespace

std::string PodExpectationKey(const std::string& job_key) { return absl::StrCat(job_key, "/pods"); }
std::string ServiceExpectationKey(const std::string& job_key) {
  return absl::StrCat(job_key, "/services");
}

struct Reconciler::Pass {
  const ReconcilerDeps& d;
  const std::string key;
  // The cached job the pass decides from: shared with the cache (objects
  // there are immutable), not copied.
  const ObjectPtr job_object;
  const kube::Json& job_json;
  api::TrainingJob job;
  api::JobStatus status;
  api::JobStatus original_status;
  std::string ns;
  std::string name;
  std::string uid;
  absl::Time now;
  std::string now_str;
  std::optional<absl::Duration> requeue;
  absl::Status error;
  JobObjects objects;  // observed: the pods and Services the job owns
  // Whether the earlier passes' creates and deletes had all been observed
  // when Collect() read the caches. Read before the caches (as the Job
  // controller does): the informers update a cache before they mark the
  // object observed, so a satisfied expectation read first guarantees the
  // cache read after it shows those objects. Read after, an object observed
  // in between is missing from `objects` but no longer expected, and the pass
  // would create it again (a refused duplicate, 409). The checks below also
  // ask again, so that this pass's own expectations count too.
  bool pods_settled_at_collect = false;
  bool services_settled_at_collect = false;
  bool PodsSettled() const {
    return pods_settled_at_collect && d.expectations->Satisfied(PodExpectationKey(key));
  }
  bool ServicesSettled() const {
    return services_settled_at_collect && d.expectations->Satisfied(ServiceExpectationKey(key));
  }
  bool restarting = false;
  // An elastic job scaled outside [minReplicas, maxReplicas] after it was
  // admitted: what was asked and what runs (api::ClampElasticWorkers).
  std::optional<api::ElasticClamp> clamp;
  // Why this pass restarted a replica: the Restarting condition's reason
  // and message (api/failure_reason.h); empty for in-place restarts.
  std::string restart_reason, restart_message;
  absl::Mutex created_mu;
  std::set<std::string> created_pods ABSL_GUARDED_BY(created_mu);
  std::set<std::string> created_services ABSL_GUARDED_BY(created_mu);
  // Reported once the status that records them is written: a pass on a
  // stale cache that loses the write must not count a transition again.
  std::vector<std::function<void()>> on_written;
  // The requests the pass decided on, for Act().
  std::vector<std::function<absl::Status()>> steps;
  std::vector<std::function<absl::Status()>> service_creates;
  std::vector<std::function<absl::Status()>> pod_creates;
  std::set<std::string> expected_services;  // the names of service_creates
  std::set<std::string> expected_pods;      // the names of pod_creates
  bool write_status = false;

  void OnWritten(std::function<void()> f) { on_written.push_back(std::move(f)); }

  Pass(const ReconcilerDeps& deps, std::string k, ObjectPtr job)
      : d(deps), key(std::move(k)), job_object(std::move(job)), job_json(*job_object) {}

  void Requeue(absl::Duration after) {
    after = std::max(after, absl::Milliseconds(10));
    if (!requeue || after < *requeue) requeue = after;
  }
  void Note(const absl::Status& s) {
    if (!s.ok() && error.ok()) error = s;
  }
  void Event(const std::string& type, const std::string& reason, const std::string& message) {
    d.events->Record(job_json, type, reason, message);
  }
  void Log(const std::string& message) {
    d.logger->Info(kComponent, absl::StrCat(key, ": ", message));
  }

  // Observe: the expectations, then the caches (see above).
  void Collect() {
    pods_settled_at_collect = d.expectations->Satisfied(PodExpectationKey(key));
    services_settled_at_collect = d.expectations->Satisfied(ServiceExpectationKey(key));
    objects = CollectJobObjects(job, uid, *d.pods, *d.services);
  }

  // Plans the deletion of a pod (precondition: its uid, so a newer pod of
  // the same name is never hit), expected from now on. NotFound counts as
  // done.
  // `force`: grace period 0, for a pod whose kubelet will never confirm
  // the deletion (node_loss.h).
  void PlanDeletePod(const ObjectPtr& pod, const std::string& why, bool force = false) {
    const std::string pod_uid = kube::Uid(*pod);
    const std::string pod_name = kube::Name(*pod);
    d.expectations->ExpectDeletions(PodExpectationKey(key), {pod_uid});
    steps.push_back([this, pod_uid, pod_name, why, force]() -> absl::Status {
      kube::DeleteOptions options;
      options.precondition_uid = pod_uid;
      options.propagation_policy = "Background";
      if (force) options.grace_period_seconds = 0;
      absl::StatusOr<kube::Json> deleted = d.client->Delete(kube::kPods, ns, pod_name, options);
      if (!deleted.ok()) {
        d.expectations->DeletionObserved(PodExpectationKey(key), pod_uid);
        if (absl::IsNotFound(deleted.status()) || kube::IsConflict(deleted.status())) {
          return absl::OkStatus();
        }
        return deleted.status();
      }
      Event(kEventNormal, "SuccessfulDeletePod", absl::StrCat("Deleted pod: ", pod_name, why));
      return absl::OkStatus();
    });
  }

  void PlanDeleteService(const ObjectPtr& svc) {
    const std::string svc_uid = kube::Uid(*svc);
    const std::string svc_name = kube::Name(*svc);
    steps.push_back([this, svc_uid, svc_name]() -> absl::Status {
      kube::DeleteOptions options;
      options.precondition_uid = svc_uid;
      absl::StatusOr<kube::Json> deleted = d.client->Delete(kube::kServices, ns, svc_name, options);
      if (!deleted.ok() && !absl::IsNotFound(deleted.status()) &&
          !kube::IsConflict(deleted.status())) {
        return deleted.status();
      }
      if (deleted.ok()) {
        Event(kEventNormal, "SuccessfulDeleteService", absl::StrCat("Deleted service: ", svc_name));
      }
      return absl::OkStatus();
    });
  }

  // cleanPodPolicy after the job finished (or hit its deadline, or failed).
  void CleanUp() {
    api::CleanPodPolicy policy =
        job.spec.run_policy.clean_pod_policy.value_or(api::CleanPodPolicy::kRunning);
    for (const CleanUpItem& item : PodsToCleanUp(policy, objects)) {
      PlanDeletePod(item.pod, " (cleanPodPolicy)");
      if (item.service != nullptr) PlanDeleteService(item.service);
    }
    if (policy == api::CleanPodPolicy::kNone) return;
    if (d.pod_groups != nullptr) {
      if (ObjectPtr group = d.pod_groups->Get(kube::ObjectKey(ns, name));
          group && kube::ControllerUid(*group) == uid) {
        steps.push_back([this]() -> absl::Status {
          absl::StatusOr<kube::Json> deleted = d.client->Delete(kube::kPodGroups, ns, name);
          if (!deleted.ok() && !absl::IsNotFound(deleted.status())) return deleted.status();
          return absl::OkStatus();
        });
      }
    }
  }

  void Fail(const std::string& reason, const std::string& message) {
    if (!IsConditionTrue(status, kCondFailed)) {
      OnWritten([this, reason, message] {
        d.metrics->JobFailed(ns);
        Event(kEventWarning, reason, message);
      });
      Log(absl::StrCat("failed: ", message));
    }
    SetCondition(status, kCondFailed, true, reason, message, now_str);
    if (status.completion_time.empty()) status.completion_time = now_str;
  }

  // `message`: the Succeeded condition's (job_phase.h).
  void Succeed(const std::string& message) {
    if (!IsConditionTrue(status, kCondSucceeded)) {
      OnWritten([this, message] {
        d.metrics->JobSucceeded(ns);
        Event(kEventNormal, "JobSucceeded", message);
      });
      Log("succeeded");
    }
    SetCondition(status, kCondSucceeded, true, "JobSucceeded", message, now_str);
    if (status.completion_time.empty()) status.completion_time = now_str;
  }

  // TTL after the job finished: delete the job (its pods and services go
  // with it through garbage collection) or come back when it is due.
  bool HandleTtl() {
    std::optional<int64_t> done_us = kube::ParseTimeMicros(status.completion_time);
    const TimeLimit ttl =
        TtlAfterFinished(job.spec.run_policy, done_us ? absl::FromUnixMicros(*done_us) : now, now);
    if (!ttl.passed) {
      if (ttl.wait) Requeue(*ttl.wait);
      return false;
    }
    steps.push_back([this]() -> absl::Status {
      kube::DeleteOptions options;
      options.propagation_policy = "Foreground";
      options.precondition_uid = uid;
      absl::StatusOr<kube::Json> deleted = d.client->Delete(kube::kTrainingJobs, ns, name, options);
      if (!deleted.ok() && !absl::IsNotFound(deleted.status())) return deleted.status();
      Log("deleted: ttlSecondsAfterFinished passed");
      return absl::OkStatus();
    });
    return true;
  }

  // runPolicy.nodeLostTimeoutSeconds, when the operator watches Nodes.
  std::optional<absl::Duration> NodeLostTimeout() const {
    return controller::NodeLostTimeout(job.spec.run_policy, d.nodes != nullptr);
  }

  // Pods still Terminating nodeLostTimeoutSeconds past their grace period
  // (their kubelet is gone and will never confirm) are force-deleted. Runs
  // before the failure policy, which waits for pending deletes to show up:
  // these never would.
  void ForceDeleteStuckPods() {
    const std::optional<absl::Duration> timeout = NodeLostTimeout();
    if (!timeout) return;
    const StuckTerminating stuck = FindStuckTerminating(objects.pods, *timeout, now);
    if (stuck.wait) Requeue(*stuck.wait);
    for (const ObjectPtr& pod : stuck.pods) {
      const std::string node = kube::StringAt(*pod, {"spec", "nodeName"});
      Event(kEventWarning, "ForceDeleted",
            absl::StrCat("pod ", kube::Name(*pod), node.empty() ? "" : " on node ", node,
                         " still Terminating ", absl::ToInt64Seconds(*timeout),
                         " s past its grace period (runPolicy.nodeLostTimeoutSeconds): "
                         "force-deleting it"));
      PlanDeletePod(pod, " (stuck Terminating: forced)", /*force=*/true);
    }
  }

  // Pods that failed or restarted, per restart policy (failed_replicas.h
  // finds them, failure_policy.h decides). False when the job failed.
  bool ApplyFailurePolicy() {
    ForceDeleteStuckPods();
    // Until the deletes of the last pass show up in the cache, the failed
    // pods seen here may be the ones already handled: do not count twice.
    if (!PodsSettled()) return true;
    auto recreations = [&](ReplicaType t) -> int {
      auto it = status.replica_statuses.find(t);
      return it == status.replica_statuses.end() ? 0 : it->second.restarts;
    };
    int total_restarts = 0;
    for (const auto& [type, spec] : job.spec.replica_specs) total_restarts += recreations(type);
    for (const auto& [k, pod] : objects.pods) total_restarts += ContainerRestarts(*pod);
    const int previous = status.restart_count.value_or(0);
    if (total_restarts > previous) {
      for (int i = previous; i < total_restarts; ++i) d.metrics->JobRestarted(ns);
      restarting = true;  // in-place container restarts (OnFailure/Always)
    }
    status.restart_count = std::max(previous, total_restarts);
    FailedReplicas found =
        FindFailedReplicas(job, objects.pods, status, d.nodes, NodeLostTimeout(), now);
    if (found.wait) Requeue(*found.wait);
    for (const FailedReplica& f : found.stuck) {
      if (RecordLastFailure(f)) {
        d.metrics->ReplicaFailed(ns, api::FailureReasonName(f.reason));
        Event(kEventWarning, api::FailureReasonName(f.reason), DescribeFailure(f));
      }
    }
    const std::vector<FailedReplica>& failed = found.failed;
    const std::vector<ObjectPtr>& failed_pods = found.pods;
    const std::vector<bool>& force = found.force;
    const int disruptions = status.disruption_count.value_or(0);
    const FailureDecision decision =
        DecideFailures(name, job.spec.run_policy, total_restarts, disruptions, failed);
    for (size_t i : decision.disrupted) {
      const FailedReplica& f = failed[i];
      const int32_t count = status.disruption_count.value_or(0) + 1;
      status.disruption_count = count;
      RecordLastFailure(f);
      d.metrics->ReplicaFailed(ns, api::FailureReasonName(f.reason));
      Event(kEventWarning, api::FailureReasonName(f.reason),
            absl::StrCat(DescribeFailure(f),
                         ": recreating; a disruption, not counted toward "
                         "backoffLimit (",
                         count, " of maxDisruptions ", MaxDisruptions(job.spec.run_policy), ")"));
      if (!f.deleting) PlanDeletePod(failed_pods[i], " (disruption)", force[i]);
      NoteRestart(f);
    }
    for (size_t i : decision.restart) {
      const FailedReplica& f = failed[i];
      ++status.replica_statuses[f.type].restarts;
      status.restart_count = status.restart_count.value_or(0) + 1;
      d.metrics->JobRestarted(ns);
      RecordLastFailure(f);
      d.metrics->ReplicaFailed(ns, api::FailureReasonName(f.reason));
      Event(kEventWarning, "Restarting",
            absl::StrCat(DescribeFailure(f), ": restarting (policy ",
                         api::RestartPolicyName(f.policy), ")"));
      if (!f.deleting) PlanDeletePod(failed_pods[i], " (restart)", force[i]);
      NoteRestart(f);
    }
    if (decision.fail.has_value()) {
      // The failure that ended the job is the last one reported.
      for (const FailedReplica& f : failed) {
        if (decision.fail->message.find(DescribeFailure(f)) != std::string::npos) {
          if (RecordLastFailure(f)) d.metrics->ReplicaFailed(ns, api::FailureReasonName(f.reason));
          break;
        }
      }
      Fail(decision.fail->reason, decision.fail->message);
      return false;
    }
    return true;
  }

  // The Stalled condition from the progress poller's readings (no replica
  // advanced for runPolicy.stallTimeoutSeconds), and runPolicy.stallPolicy:
  // None keeps the job running, Stalled True naming the replicas behind
  // until progress resumes; Restart deletes their pods (recreated, resuming
  // from the checkpoint; counted as restarts) and leaves Stalled False with
  // reason StalledReplicasRestarted; Fail fails the job. False when the job
  // failed.
  bool ApplyStallPolicy() {
    if (d.stalls == nullptr) return true;
    const api::RunPolicy& rp = job.spec.run_policy;
    const int64_t timeout = rp.stall_timeout_seconds.value_or(api::kDefaultStallTimeoutSeconds);
    const std::optional<Stall> stall =
        timeout > 0 ? d.stalls->Check(uid, static_cast<double>(timeout), d.clock->NowSeconds())
                    : std::nullopt;
    if (!stall.has_value()) {
      if (IsConditionTrue(status, kCondStalled)) {
        SetCondition(status, kCondStalled, false, "ProgressResumed", "", now_str);
        OnWritten([this] { Event(kEventNormal, "ProgressResumed", "training progresses again"); });
      }
      return true;
    }
    const std::string message = absl::StrCat(
        "no progress for ", timeout, " s (runPolicy.stallTimeoutSeconds): ", stall->message);
    const api::StallPolicy policy = rp.stall_policy.value_or(api::StallPolicy::kNone);
    if (policy == api::StallPolicy::kFail) {
      OnWritten(
          [this, message] { Event(kEventWarning, "Stalled", message + "; failing the job"); });
      SetCondition(status, kCondStalled, true, "NoProgress", message, now_str);
      Fail("Stalled", absl::StrCat("TrainingJob ", name, " stalled: ", message));
      return false;
    }
    if (policy == api::StallPolicy::kNone) {
      if (!IsConditionTrue(status, kCondStalled)) {
        OnWritten([this, message] { Event(kEventWarning, "Stalled", message); });
      }
      SetCondition(status, kCondStalled, true, "NoProgress", message, now_str);
      return true;
    }
    // Restart.
    OnWritten([this, message] {
      Event(kEventWarning, "Stalled", message + "; restarting the replicas behind");
    });
    for (const auto& [k, pod] : objects.pods) {
      if (kube::IsBeingDeleted(*pod)) continue;
      if (std::find(stall->pods.begin(), stall->pods.end(), kube::Name(*pod)) ==
          stall->pods.end()) {
        continue;
      }
      ++status.replica_statuses[k.first].restarts;
      status.restart_count = status.restart_count.value_or(0) + 1;
      d.metrics->JobRestarted(ns);
      PlanDeletePod(pod, " (stalled)");
    }
    // True for the record (its lastTransitionTime), False at once: the
    // restarted replicas are no longer stalled.
    SetCondition(status, kCondStalled, true, "NoProgress", message, now_str);
    SetCondition(status, kCondStalled, false, "StalledReplicasRestarted", message, now_str);
    // The recreated replicas start the watch over.
    d.stalls->Forget(uid);
    restarting = true;
    restart_reason = "Stalled";
    restart_message = absl::StrCat("TrainingJob ", name, " is restarting: ", message);
    return true;
  }

  // The Unschedulable condition (runPolicy.schedulingTimeoutSeconds): the
  // replicas whose pods waited that long for a node, with the scheduler's
  // message; runPolicy.unschedulablePolicy Wait keeps waiting, Fail fails
  // the job. Requeues for the moment the next pod reaches the timeout.
  // False when the job failed.
  bool ApplySchedulingPolicy() {
    const api::RunPolicy& rp = job.spec.run_policy;
    SchedulingCheck check;
    if (rp.scheduling_timeout_seconds.value_or(0) > 0) {
      std::vector<ReplicaPod> replicas;
      for (const auto& [k, pod] : objects.pods) {
        replicas.push_back(
            ReplicaPod{absl::StrCat(api::ReplicaTypeLower(k.first), "-", k.second), pod.get()});
      }
      std::optional<Gang> gang;
      if (d.pod_groups != nullptr && rp.scheduling_policy) {
        int64_t total = 0;
        for (const auto& [type, spec] : job.spec.replica_specs) total += spec.Replicas();
        gang = Gang{name, rp.scheduling_policy->min_available.value_or(total)};
      }
      check = CheckScheduling(replicas, *rp.scheduling_timeout_seconds, now, gang);
      if (check.wait) Requeue(*check.wait);
    }
    if (!check.message) {
      if (IsConditionTrue(status, kCondUnschedulable)) {
        SetCondition(status, kCondUnschedulable, false, "Scheduled", "", now_str);
        OnWritten([this] { Event(kEventNormal, "Scheduled", "every replica has a node"); });
      }
      return true;
    }
    const std::string message = *check.message;
    const bool fail = rp.unschedulable_policy.value_or(api::UnschedulablePolicy::kWait) ==
                      api::UnschedulablePolicy::kFail;
    if (!IsConditionTrue(status, kCondUnschedulable)) {
      OnWritten([this, message, fail] {
        Event(kEventWarning, "Unschedulable",
              fail ? message + "; failing the job" : message + "; waiting");
      });
    }
    SetCondition(status, kCondUnschedulable, true, "SchedulingTimeout", message, now_str);
    if (fail) {
      Fail("Unschedulable", absl::StrCat("TrainingJob ", name, ": ", message));
      return false;
    }
    return true;
  }

  // This pass restarts (or recreates) `f`: the Restarting condition says why.
  void NoteRestart(const FailedReplica& f) {
    restarting = true;
    restart_reason = api::FailureReasonName(f.reason);
    restart_message = absl::StrCat("TrainingJob ", name, " is restarting: ", DescribeFailure(f));
  }

  // status.lastFailure := f (replica, pod, node, exit code, reason, message,
  // time). False when it already holds this pod's failure for this reason
  // (so a pod stuck for many passes is reported once).
  bool RecordLastFailure(const FailedReplica& f) {
    return controller::RecordLastFailure(status, f, now_str);
  }

  // The job's token Secret, created just before pods that read it. The
  // operator may only create Secrets (no list/watch/get: it would otherwise
  // read every Secret of the cluster), so it never reads this one: each pass
  // that is about to create pods creates it, and AlreadyExists means an
  // earlier pass did (the name is per job, with an ownerReference to it, so
  // garbage collection removes it with the job).
  void PlanSecret() {
    steps.push_back([this]() -> absl::Status {
      absl::StatusOr<kube::Json> created =
          d.client->Create(kube::kSecrets, ns, BuildTokenSecret(job, job_json, RandomToken()));
      if (!created.ok() && !absl::IsAlreadyExists(created.status())) return created.status();
      return absl::OkStatus();
    });
  }

  void PlanPodGroup() {
    if (d.pod_groups == nullptr || !job.spec.run_policy.scheduling_policy) return;
    if (d.pod_groups->Get(kube::ObjectKey(ns, name)) != nullptr) return;
    steps.push_back([this]() -> absl::Status {
      absl::StatusOr<kube::Json> created =
          d.client->Create(kube::kPodGroups, ns, BuildPodGroup(job, job_json));
      if (!created.ok() && !absl::IsAlreadyExists(created.status())) return created.status();
      if (created.ok()) {
        Event(kEventNormal, "SuccessfulCreatePodGroup", absl::StrCat("Created PodGroup: ", name));
      }
      return absl::OkStatus();
    });
  }

  // Missing services and pods (and the Secret and PodGroup before them),
  // expected from now on; Act() creates them in parallel batches.
  void PlanCreates() {
    const std::string svc_key = ServiceExpectationKey(key);
    const std::string pod_key = PodExpectationKey(key);
    // The objects are built when they are sent, not while the plan waits.
    auto create_service = [this, svc_key](const std::string& svc_name,
                                          std::function<kube::Json()> build) {
      return [this, svc_key, svc_name, build = std::move(build)]() -> absl::Status {
        absl::StatusOr<kube::Json> created = d.client->Create(kube::kServices, ns, build());
        if (!created.ok()) {
          d.expectations->CreationObserved(svc_key, svc_name);
          return absl::IsAlreadyExists(created.status()) ? absl::OkStatus() : created.status();
        }
        Created(&created_services, svc_name);
        return absl::OkStatus();
      };
    };
    if (ServicesSettled()) {
      // A scale-down's Services go with its pods, highest index first.
      for (const ObjectPtr& svc : StrayServicesToDelete(job, objects)) PlanDeleteService(svc);
      for (const ServiceToCreate& svc : MissingServices(job, objects)) {
        expected_services.insert(svc.name);
        if (!svc.replica) {
          service_creates.push_back(
              create_service(svc.name, [this] { return BuildJobService(job, job_json); }));
          continue;
        }
        const ReplicaType type = svc.replica->first;
        const int i = svc.replica->second;
        service_creates.push_back(create_service(
            svc.name, [this, type, i] { return BuildService(job, job_json, type, i); }));
      }
    }
    d.expectations->ExpectCreations(svc_key, expected_services);
    if (PodsSettled()) {
      for (const PodToCreate& missing : MissingPods(job, objects.pods, status)) {
        const ReplicaType type = missing.replica.first;
        const int i = missing.replica.second;
        const std::string pod_name = missing.name;
        expected_pods.insert(pod_name);
        pod_creates.push_back([this, type, i, pod_name, pod_key]() -> absl::Status {
          absl::StatusOr<kube::Json> created =
              d.client->Create(kube::kPods, ns, BuildPod(job, job_json, type, i, d.build));
          if (!created.ok()) {
            d.expectations->CreationObserved(pod_key, pod_name);
            if (absl::IsAlreadyExists(created.status())) return absl::OkStatus();
            Event(kEventWarning, "FailedCreatePod",
                  absl::StrCat("Error creating pod ", pod_name, ": ", created.status().message()));
            return created.status();
          }
          d.metrics->PodCreated(ns);
          Created(&created_pods, pod_name);
          return absl::OkStatus();
        });
      }
      d.expectations->ExpectCreations(pod_key, expected_pods);
      if (!expected_pods.empty()) PlanSecret();
      for (const ObjectPtr& pod : StrayPodsToDelete(objects)) {
        PlanDeletePod(pod, " (replicas scaled down)");
      }
    }
  }

  // The pass's requests, in order: the steps (deletes, the Secret, the
  // PodGroup, a TTL's deletion of the job), then, if they all went
  // through, the creates, then the status write. Errors are noted: the
  // first is the pass's (the key is retried with backoff).
  absl::Status Act() {
    for (const auto& step : steps) Note(step());
    if (!service_creates.empty() || !pod_creates.empty()) {
      if (error.ok()) {
        // Services and pods are two slow-start sequences run side by side:
        // a job's creates take the rounds of its pods (1, 2, 1 for four),
        // not of its pods and Services one after the other (1, 2, 4, 1).
        Note(RunSlowStartSideBySide(service_creates, pod_creates, d.max_parallel_creates));
      } else {
        // Not attempted: nothing will be observed.
        for (const std::string& n : expected_services) {
          d.expectations->CreationObserved(ServiceExpectationKey(key), n);
        }
        for (const std::string& n : expected_pods) {
          d.expectations->CreationObserved(PodExpectationKey(key), n);
        }
      }
      // One event per kind and pass, naming every object it created: a
      // job's creates cost one event request, not one per object.
      absl::MutexLock lock(&created_mu);
      if (!created_services.empty()) {
        Event(
            kEventNormal, "SuccessfulCreateService",
            absl::StrCat(created_services.size() == 1 ? "Created service: " : "Created services: ",
                         absl::StrJoin(created_services, ", ")));
      }
      if (!created_pods.empty()) {
        Event(kEventNormal, "SuccessfulCreatePod",
              absl::StrCat(created_pods.size() == 1 ? "Created pod: " : "Created pods: ",
                           absl::StrJoin(created_pods, ", ")));
      }
    }
    if (write_status) Note(WriteStatus());
    return error;
  }

  // Names created by this pass's parallel creates, for its events.
  void Created(std::set<std::string>* names, const std::string& name) {
    absl::MutexLock lock(&created_mu);
    names->insert(name);
  }
  void ComputeReplicaStatuses() { controller::ComputeReplicaStatuses(job, objects.pods, status); }

  // Success policy, Restarting and Running (job_phase.h decides).
  void DecidePhase() {
    const std::vector<api::ReplicaState> states = ReplicaStates(job, objects.pods, status);
    const PhaseDecision decision = controller::DecidePhase(job, states, restarting);
    switch (decision.kind) {
      case PhaseDecision::Kind::kSucceeded:
        Succeed(decision.message);
        break;
      case PhaseDecision::Kind::kFailed:
        Fail(decision.reason, decision.message);
        break;
      case PhaseDecision::Kind::kRestarting:
        // The condition names what this pass restarted, and why.
        SetCondition(status, kCondRestarting, true,
                     restart_reason.empty() ? decision.reason : restart_reason,
                     restart_message.empty() ? decision.message : restart_message, now_str);
        break;
      case PhaseDecision::Kind::kRunning:
        SetCondition(status, kCondRunning, true, decision.reason,
                     clamp ? absl::StrCat(decision.message, " ", ScaleRefusedMessage(*clamp), ".")
                           : decision.message,
                     now_str);
        break;
      case PhaseDecision::Kind::kNone:
        break;
    }
  }

  // Elastic jobs: the Waiting condition (fewer running workers than
  // minReplicas) and the ScaleRefused event, once per refused count: when
  // the Running condition's message first carries it.
  void DecideElastic() {
    if (!job.Elastic()) return;
    if (std::optional<std::string> waiting = WaitingMessage(job, objects.pods)) {
      if (!IsConditionTrue(status, kCondWaiting)) {
        OnWritten([this, m = *waiting] { Event(kEventNormal, "Waiting", m); });
      }
      SetCondition(status, kCondWaiting, true, "NotEnoughWorkers", *waiting, now_str);
    } else if (IsConditionTrue(status, kCondWaiting)) {
      SetCondition(status, kCondWaiting, false, "EnoughWorkers",
                   absl::StrCat(RunningWorkers(objects.pods), " of minReplicas ",
                                job.spec.elastic_policy->min_replicas, " running"),
                   now_str);
    }
    if (clamp) {
      const api::Condition* before = FindCondition(original_status, kCondRunning);
      const api::Condition* after = FindCondition(status, kCondRunning);
      if (after != nullptr && after->status == api::ConditionStatus::kTrue &&
          (before == nullptr || before->message != after->message)) {
        OnWritten([this, m = ScaleRefusedMessage(*clamp)] {
          Event(kEventWarning, "ScaleRefused",
                absl::StrCat(m, " (no admission webhook refused it)"));
        });
      }
    }
  }

  // PUT /status with the resourceVersion the pass started from. A conflict
  // means the cache was stale: the pass is not replayed onto the newer
  // object (counters derived from stale state would overwrite fresh ones);
  // the key is requeued and recomputed from the updated cache.
  // Dispatch has dropped the write when the status did not change.
  absl::Status WriteStatus() {
    status.last_reconcile_time = now_str;
    kube::Json object = job_json;
    object["status"] = api::StatusToJson(status);
    absl::StatusOr<kube::Json> written = d.client->UpdateStatus(kube::kTrainingJobs, object);
    if (written.ok()) {
      if (d.job_written) d.job_written(*written);
      for (const auto& f : on_written) f();
      return absl::OkStatus();
    }
    if (absl::IsNotFound(written.status())) return absl::OkStatus();
    return written.status();
  }
};

Reconciler::Reconciler(ReconcilerDeps deps) : deps_(std::move(deps)) {}

absl::StatusOr<ReconcileResult> Reconciler::Reconcile(const std::string& job_key) {
  // No exception leaves the reconciler: an object shaped in a way the code
  // did not foresee (nlohmann throws on type errors) fails this pass with an
  // error, which the work queue retries with backoff, instead of ending the
  // operator (as controller-runtime recovers panics in Reconcile).
  try {
    return ReconcileOnce(job_key);
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("reconcile ", job_key, " raised an exception: ", e.what()));
  }
}

absl::StatusOr<ReconcileResult> Reconciler::ReconcileOnce(const std::string& job_key) {
  ObjectPtr cached = deps_.jobs->Get(job_key);
  if (cached == nullptr) {
    deps_.expectations->Forget(PodExpectationKey(job_key));
    deps_.expectations->Forget(ServiceExpectationKey(job_key));
    if (deps_.stopped_checkpoints != nullptr) deps_.stopped_checkpoints->Forget(job_key);
    return ReconcileResult{};
  }
  if (kube::IsBeingDeleted(*cached)) return ReconcileResult{};
  // An earlier pass's requests are still going out: this pass would decide
  // from a cache that cannot show them yet. The runner queues the key again
  // when they are done.
  if (deps_.runner != nullptr && deps_.runner->DeferIfBusy(job_key)) {
    return ReconcileResult{std::nullopt, /*acting=*/true};
  }

  auto pass = std::make_shared<Pass>(deps_, job_key, cached);
  Pass& p = *pass;
  p.ns = kube::Namespace(p.job_json);
  p.name = kube::Name(p.job_json);
  p.uid = kube::Uid(p.job_json);
  p.now = absl::FromUnixMicros(deps_.clock->UnixMicros());
  p.now_str = kube::FormatTime(absl::ToUnixMicros(p.now));
  // The stored status, typed; one the schema let through but that does not
  // read (a value only this operator writes, edited by hand) fails the pass.
  auto stored = p.job_json.find("status");
  absl::StatusOr<api::JobStatus> status =
      api::StatusFromJson(stored == p.job_json.end() ? kube::Json() : *stored);
  if (!status.ok()) {
    return absl::Status(status.status().code(),
                        absl::StrCat(job_key, ": ", status.status().message()));
  }
  p.status = *std::move(status);
  p.original_status = p.status;

  absl::StatusOr<api::TrainingJob> parsed = api::FromJson(p.job_json);
  if (parsed.ok()) {
    api::ApplyDefaults(*parsed);
    // An admitted elastic job scaled outside its range (no admission
    // webhook refused it: operator/webhook/) runs at the nearest bound; a
    // job created outside it is invalid (Validate).
    if (FindCondition(p.status, kCondCreated) != nullptr) {
      p.clamp = api::ClampElasticWorkers(*parsed);
    }
    if (absl::Status valid = api::Validate(*parsed); !valid.ok()) parsed = valid;
  }
  if (!parsed.ok()) {
    // Nothing is created for an invalid spec; Failed is final.
    if (!IsConditionTrue(p.status, kCondFailed)) {
      p.job.metadata.name = p.name;
      p.Fail("InvalidSpec", std::string(parsed.status().message()));
    }
    p.write_status = true;
    return Dispatch(pass, ReconcileResult{});
  }
  p.job = *std::move(parsed);

  if (FindCondition(p.status, kCondCreated) == nullptr) {
    SetCondition(p.status, kCondCreated, true, "TrainingJobCreated",
                 absl::StrCat("TrainingJob ", p.name, " is created."), p.now_str);
    p.OnWritten([&p] { p.d.metrics->JobCreated(p.ns); });
  }
  p.Collect();
  // A replica stopped by SIGTERM (a suspend, a deleted or preempted pod)
  // says in its termination message which checkpoint it wrote.
  RecordStoppedPodCheckpoints(p.status, p.objects.pods, p.now_str);
  if (deps_.stopped_checkpoints != nullptr) {
    for (const auto& [replica, m] : deps_.stopped_checkpoints->Get(job_key)) {
      RecordLastCheckpoint(p.status, replica, m, p.now_str);
    }
  }

  if (IsFinished(p.status)) {
    p.CleanUp();
    if (p.HandleTtl()) return Dispatch(pass, ReconcileResult{});
  } else if (p.job.spec.run_policy.suspend) {
    // Suspend: running pods go (with their grace period: each replica stops
    // at a step boundary and the one that keeps state checkpoints), the job
    // stays; resume recreates them and continues from the checkpoint.
    for (const ObjectPtr& pod : PodsToSuspend(p.objects.pods)) {
      p.PlanDeletePod(pod, " (job suspended)");
    }
    const SuspendWait stopping = PodsStillStopping(p.objects.pods, p.now);
    if (stopping.pods.empty()) {
      // Every pod has ended (or run out of grace): the checkpoint they
      // reported, if any, is in status.lastCheckpoint by now.
      const std::optional<api::LastCheckpoint>& ckpt = p.status.last_checkpoint;
      const std::string message =
          ckpt ? absl::StrCat("TrainingJob ", p.name, " is suspended with a checkpoint at step ",
                              ckpt->step, " (", ckpt->replica, ").")
               : absl::StrCat("TrainingJob ", p.name, " is suspended.");
      if (!IsConditionTrue(p.status, kCondSuspended)) {
        p.OnWritten([&p, message] { p.Event(kEventNormal, "Suspended", message); });
      }
      SetCondition(p.status, kCondSuspended, true, "JobSuspended", message, p.now_str);
    } else {
      // Suspended only once they have: until then a job whose condition
      // says so has not saved its state yet.
      SetCondition(p.status, kCondSuspended, false, "Suspending",
                   absl::StrCat("waiting for ", absl::StrJoin(stopping.pods, ", "),
                                " to stop and checkpoint"),
                   p.now_str);
      // Their watch events bring the next pass; the end of a grace period
      // brings one too. A pod whose deletion this pass only plans has no
      // deadline yet: its update will.
      if (stopping.wait) p.Requeue(*stopping.wait);
    }
    SetCondition(p.status, kCondRunning, false, "JobSuspended", "", p.now_str);
    // A suspended job waits for no workers.
    SetCondition(p.status, kCondWaiting, false, "JobSuspended", "", p.now_str);
    p.status.start_time.clear();
    p.ComputeReplicaStatuses();
  } else {
    if (IsConditionTrue(p.status, kCondSuspended)) {
      SetCondition(p.status, kCondSuspended, false, "JobResumed",
                   absl::StrCat("TrainingJob ", p.name, " is resumed."), p.now_str);
      p.OnWritten([&p] {
        p.Event(kEventNormal, "Resumed", absl::StrCat("TrainingJob ", p.name, " is resumed."));
      });
    }
    if (p.status.start_time.empty()) p.status.start_time = p.now_str;
    std::optional<int64_t> start_us = kube::ParseTimeMicros(p.status.start_time);
    absl::Time start = start_us ? absl::FromUnixMicros(*start_us) : p.now;
    const TimeLimit deadline = ActiveDeadline(p.job.spec.run_policy, start, p.now);
    if (deadline.passed) {
      p.Fail("DeadlineExceeded",
             DeadlineExceededMessage(p.name, *p.job.spec.run_policy.active_deadline_seconds));
    } else if (deadline.wait) {
      p.Requeue(*deadline.wait);
    }
    if (!deadline.passed && p.ApplyFailurePolicy() && p.ApplyStallPolicy() &&
        p.ApplySchedulingPolicy()) {
      p.PlanPodGroup();
      p.PlanCreates();
      p.ComputeReplicaStatuses();
      p.DecidePhase();
      p.DecideElastic();
    } else {
      p.ComputeReplicaStatuses();
    }
    if (IsFinished(p.status)) {
      // Clean up only once Succeeded/Failed is stored: the pods deleted
      // here are the evidence (exit codes, restart counts) of that decision,
      // and a status write that conflicts would otherwise lose it and let
      // the next pass recreate them. The write's watch event (and this
      // requeue) brings the next pass.
      p.Requeue(absl::ZeroDuration());
    }
  }

  // While this job's creates (or deletes) are in flight, including the
  // ones this pass plans (its counts, read from the cache, cannot show
  // them), a status that only moves observed counts waits: the watch
  // events of those objects bring the pass that writes it, once, instead of
  // one write per pod as it appears.
  const bool in_flight = !deps_.expectations->Satisfied(PodExpectationKey(job_key)) ||
                         !deps_.expectations->Satisfied(ServiceExpectationKey(job_key));
  p.write_status = !(in_flight && StatusWriteCanWait(p.original_status, p.status));
  return Dispatch(pass, ReconcileResult{p.requeue});
}

absl::StatusOr<ReconcileResult> Reconciler::Dispatch(const std::shared_ptr<Pass>& pass,
                                                     ReconcileResult result) {
  Pass& p = *pass;
  // An unchanged status is not written.
  if (p.status == p.original_status) p.write_status = false;
  if (p.steps.empty() && p.service_creates.empty() && p.pod_creates.empty() && !p.write_status) {
    return result;
  }
  if (deps_.runner == nullptr) {
    absl::Status acted = p.Act();
    if (!acted.ok()) return acted;
    return result;
  }
  // The pass lives on in the plan until its requests are done; the cached
  // objects it decided from are not needed for them: let the caches' newer
  // versions replace them while the plan waits for a thread.
  p.original_status = api::JobStatus{};
  p.objects = JobObjects{};
  absl::Status submitted = deps_.runner->Submit(p.key, [pass] { return pass->Act(); });
  if (!submitted.ok()) return submitted;
  result.acting = true;
  return result;
}

}  // namespace kubetrain::controller
