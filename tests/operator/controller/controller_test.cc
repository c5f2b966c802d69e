// The TrainingJob operator's behaviour against the API emulator (or a real
// cluster with KUBETRAIN_TEST_KUBECONFIG): the test plays the kubelet.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "api/cluster_spec.h"
#include "api/training_job.h"
#include "operator/controller/job_status.h"
#include "operator/controller/replica_builder.h"
#include "operator/kube/api_error.h"
#include "operator/kube/leader_elector.h"
#include "operator/kube/object.h"
#include "operator/kube/resource.h"
#include "tests/operator/controller/controller_fixture.h"
#include "tests/support/wait_for.h"

namespace kubetrain::controller {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using testing_util::WaitFor;

const Json* Cond(const Json& status, const std::string& type) {
  return FindCondition(status, type);
}

class ControllerTest : public ControllerFixture {};

TEST_F(ControllerTest, PsWorkerJobRunsAndSucceeds) {
  StartController();
  CreateJob(MakeJob("mnist", 1, 2));
  ASSERT_TRUE(WaitForPods("mnist", 3));
  ASSERT_TRUE(WaitFor([&] { return Services("mnist").size() == 3; }));
  std::map<std::string, Json> pods = Pods("mnist");
  const std::string& n = ns();
  const std::string cluster =
      absl::StrCat(R"({"ps":["mnist-ps-0.)", n, R"(.svc:2222"],"worker":["mnist-worker-0.)", n,
                   R"(.svc:2222","mnist-worker-1.)", n, R"(.svc:2222"]})");
  EXPECT_EQ(EnvValue(pods["mnist-ps-0"], "TF_CONFIG"),
            absl::StrCat(R"({"cluster":)", cluster,
                         R"(,"task":{"type":"ps","index":0},"environment":"cloud"})"));
  EXPECT_EQ(EnvValue(pods["mnist-worker-1"], "TF_CONFIG"),
            absl::StrCat(R"({"cluster":)", cluster,
                         R"(,"task":{"type":"worker","index":1},"environment":"cloud"})"));
  EXPECT_EQ(EnvValue(pods["mnist-worker-1"], "KUBETRAIN_PS_HOSTS"),
            absl::StrCat("mnist-ps-0.", n, ".svc:2222"));
  EXPECT_EQ(EnvValue(pods["mnist-worker-1"], "KUBETRAIN_REPLICA_INDEX"), "1");
  Json job = GetJob("mnist");
  for (const auto& [name, pod] : pods) {
    EXPECT_EQ(kube::ControllerUid(pod), kube::Uid(job)) << name;
    EXPECT_EQ(pod["spec"]["restartPolicy"], "Never") << name;  // TFJob's default policy
    EXPECT_EQ(kube::Annotation(pod, "prometheus.io/scrape"), "true");
    bool token_from_secret = false;
    for (const Json& e : pod["spec"]["containers"][0]["env"]) {
      if (e.value("name", "") == "KUBETRAIN_JOB_TOKEN") {
        token_from_secret = kube::StringAt(e, {"valueFrom", "secretKeyRef", "name"}) ==
                            "mnist-token-" + kube::Uid(job).substr(0, 8);
      }
    }
    EXPECT_TRUE(token_from_secret) << name;
    EXPECT_EQ(pod["spec"]["containers"][0]["ports"][0]["name"], "kubetrain-port");
    // The named metrics port a PodMonitor selects, on the first container.
    EXPECT_EQ(pod["spec"]["containers"][0]["ports"][1],
              (Json{{"name", "kt-metrics"}, {"containerPort", 8090}, {"protocol", "TCP"}}))
        << name;
  }
  EXPECT_EQ(kube::Label(pods["mnist-worker-0"], "kubetrain.io/job-role"), "chief");
  EXPECT_EQ(kube::Label(pods["mnist-worker-1"], "kubetrain.io/job-role"), "");
  Json svc = Services("mnist")["mnist-worker-1"];
  EXPECT_EQ(svc["spec"]["clusterIP"], "None");
  EXPECT_EQ(svc["spec"]["selector"]["kubetrain.io/replica-index"], "1");
  EXPECT_TRUE(
      client().Get(kube::kSecrets, ns(), "mnist-token-" + kube::Uid(job).substr(0, 8)).ok());
  EXPECT_TRUE(WaitForCondition("mnist", kCondCreated));

  SetAllRunning("mnist");
  ASSERT_TRUE(WaitForCondition("mnist", kCondRunning));
  Json status = Status("mnist");
  EXPECT_EQ(status["replicaStatuses"]["Worker"]["active"], 2);
  EXPECT_EQ(status["replicaStatuses"]["Worker"]["ready"], 2);
  EXPECT_EQ(Phase(status), "Running");
  EXPECT_TRUE(status.contains("startTime"));

  SetPodSucceeded("mnist-worker-0");
  ASSERT_TRUE(WaitForCondition("mnist", kCondSucceeded));
  status = Status("mnist");
  EXPECT_TRUE(status.contains("completionTime"));
  EXPECT_EQ((*Cond(status, kCondRunning))["status"], "False");
  // What clients see: the fields the operator has always written, no more.
  auto keys = [](const Json& object) {
    std::set<std::string> out;
    for (const auto& [k, v] : object.items()) out.insert(k);
    return out;
  };
  EXPECT_EQ(keys(status),
            (std::set<std::string>{"completionTime", "conditions", "lastReconcileTime",
                                   "replicaStatuses", "restartCount", "startTime"}));
  for (const Json& c : status["conditions"]) {
    EXPECT_EQ(keys(c), (std::set<std::string>{"lastTransitionTime", "lastUpdateTime", "message",
                                              "reason", "status", "type"}))
        << c.dump();
  }
  EXPECT_EQ(
      keys(status["replicaStatuses"]["PS"]),
      (std::set<std::string>{"active", "failed", "ready", "restarts", "selector", "succeeded"}));
  EXPECT_EQ(status["replicaStatuses"]["Worker"]["completedIndexes"], Json::array({0}));
  EXPECT_EQ(status["restartCount"], 0);
  // The typed status reads it and writes it back byte for byte.
  absl::StatusOr<api::JobStatus> typed = api::StatusFromJson(status);
  ASSERT_TRUE(typed.ok()) << typed.status();
  EXPECT_EQ(api::StatusToJson(*typed).dump(), status.dump());
  // cleanPodPolicy Running: the PS and the still-running worker go, the
  // completed worker stays.
  ASSERT_TRUE(WaitFor([&] { return Pods("mnist").size() == 1; }));
  EXPECT_EQ(Pods("mnist").begin()->first, "mnist-worker-0");
  EXPECT_TRUE(WaitForEvent("mnist", "JobSucceeded"));
  std::vector<std::string> reasons = EventReasons("mnist");
  EXPECT_THAT(reasons, Contains("SuccessfulCreatePod"));
  EXPECT_THAT(reasons, Contains("SuccessfulDeletePod"));
  // Metrics are counted after the API answers: wait for them, then check
  // nothing was counted twice.
  EXPECT_TRUE(WaitFor([&] { return metrics_.Get("succeeded") == 1; }));
  EXPECT_EQ(metrics_.Get("pods"), 3);
}

TEST_F(ControllerTest, ExitCodePolicyRestartsRetryableAndFailsPermanent) {
  StartController();
  CreateJob(MakeJob("ec", 1, 2,
                    Json{{"spec",
                          {{"replicaSpecs", {{"Worker", {{"restartPolicy", "ExitCode"}}}}},
                           {"runPolicy", {{"backoffLimit", 3}}}}}}));
  ASSERT_TRUE(WaitForPods("ec", 3));
  SetAllRunning("ec");
  ASSERT_TRUE(WaitForCondition("ec", kCondRunning));
  std::string old_uid = kube::Uid(Pods("ec")["ec-worker-1"]);
  SetPodFailed("ec-worker-1", 137, "OOMKilled");
  // Deleted and recreated as a new pod.
  ASSERT_TRUE(WaitFor([&] {
    auto pods = Pods("ec");
    return pods.count("ec-worker-1") && kube::Uid(pods["ec-worker-1"]) != old_uid;
  }));
  ASSERT_TRUE(WaitFor([&] { return Status("ec").value("restartCount", 0) == 1; }));
  Json status = Status("ec");
  EXPECT_EQ(status["replicaStatuses"]["Worker"]["restarts"], 1);
  EXPECT_TRUE(FindCondition(status, kCondRestarting) != nullptr);
  EXPECT_TRUE(WaitForEvent("ec", "Restarting"));
  EXPECT_FALSE(IsFinished(status));

  SetPodRunning("ec-worker-1");
  ASSERT_TRUE(WaitForCondition("ec", kCondRunning));
  SetPodFailed("ec-worker-1", 3);
  ASSERT_TRUE(WaitForCondition("ec", kCondFailed));
  Json ec_status = Status("ec");
  const Json* failed = FindCondition(ec_status, kCondFailed);
  EXPECT_EQ((*failed)["reason"], "ReplicaFailed");
  EXPECT_THAT((*failed)["message"].get<std::string>(), HasSubstr("worker-1"));
  EXPECT_THAT((*failed)["message"].get<std::string>(), HasSubstr("code 3"));
  // cleanPodPolicy Running removes the PS and worker-0.
  ASSERT_TRUE(WaitFor([&] { return Pods("ec").size() == 1; }));
}

// A preempted replica (the scheduler's DisruptionTarget condition, as a
// v1.26+ control plane writes it) is recreated without using up the
// backoff limit, and the status says which replica, why and what the
// control plane said.
TEST_F(ControllerTest, DisruptionsAreRecreatedWithoutCountingAndNamedInStatus) {
  StartController();
  CreateJob(MakeJob("dis", 0, 2,
                    Json{{"spec",
                          {{"replicaSpecs", {{"Worker", {{"restartPolicy", "ExitCode"}}}}},
                           {"runPolicy", {{"backoffLimit", 0}}}}}}));
  ASSERT_TRUE(WaitForPods("dis", 2));
  SetAllRunning("dis");
  ASSERT_TRUE(WaitForCondition("dis", kCondRunning));
  const std::string old_uid = kube::Uid(Pods("dis")["dis-worker-1"]);
  PatchPodStatus(
      "dis-worker-1",
      Json{{"phase", "Failed"},
           {"conditions", Json::array({{{"type", "DisruptionTarget"},
                                        {"status", "True"},
                                        {"reason", "PreemptionByScheduler"},
                                        {"message",
                                         "kube-scheduler: preempting to accommodate "
                                         "a higher priority pod"}}})},
           {"containerStatuses",
            Json::array({{{"name", "kubetrain"},
                          {"state", {{"terminated", {{"exitCode", 143}, {"reason", "Error"}}}}},
                          {"restartCount", 0}}})}});
  ASSERT_TRUE(WaitFor([&] {
    auto pods = Pods("dis");
    return pods.count("dis-worker-1") && kube::Uid(pods["dis-worker-1"]) != old_uid;
  }));
  ASSERT_TRUE(WaitFor([&] { return Status("dis").value("disruptionCount", 0) == 1; }));
  const Json status = Status("dis");
  EXPECT_EQ(status.value("restartCount", 0), 0) << "not counted toward backoffLimit 0";
  EXPECT_FALSE(IsFinished(status));
  const Json& last = status["lastFailure"];
  EXPECT_EQ(last["reason"], "Preempted");
  EXPECT_EQ(last["replicaType"], "Worker");
  EXPECT_EQ(last["replicaIndex"], 1);
  EXPECT_EQ(last["pod"], "dis-worker-1");
  EXPECT_EQ(last["exitCode"], 143);
  EXPECT_THAT(last["message"].get<std::string>(), HasSubstr("preempting"));
  const Json* restarting = FindCondition(status, kCondRestarting);
  ASSERT_NE(restarting, nullptr);
  EXPECT_EQ((*restarting)["reason"], "Preempted");
  EXPECT_THAT((*restarting)["message"].get<std::string>(), HasSubstr("worker-1"));
  EXPECT_TRUE(WaitForEvent("dis", "Preempted"));
  EXPECT_TRUE(WaitFor([&] { return metrics_.Get("failure:Preempted") == 1; }));
  EXPECT_EQ(metrics_.Get("restarted"), 0);
}

// A permanent exit with the runtime's error line is a ConfigError: the job
// fails at once, and its status and condition carry the runtime's line.
TEST_F(ControllerTest, AConfigErrorFailsTheJobWithTheRuntimesLine) {
  StartController();
  CreateJob(MakeJob("cfg", 0, 1,
                    Json{{"spec",
                          {{"replicaSpecs", {{"Worker", {{"restartPolicy", "ExitCode"}}}}},
                           {"runPolicy", {{"backoffLimit", 3}}}}}}));
  ASSERT_TRUE(WaitForPods("cfg", 1));
  PatchPodStatus("cfg-worker-0",
                 Json{{"phase", "Failed"},
                      {"containerStatuses",
                       Json::array({{{"name", "kubetrain"},
                                     {"state",
                                      {{"terminated",
                                        {{"exitCode", 1},
                                         {"reason", "Error"},
                                         {"message",
                                          "kubetrain: error: unknown model 'xyz' (known: cnn, "
                                          "mlp)\n"}}}}},
                                     {"restartCount", 0}}})}});
  ASSERT_TRUE(WaitForCondition("cfg", kCondFailed));
  const Json status = Status("cfg");
  EXPECT_EQ(status["lastFailure"]["reason"], "ConfigError");
  EXPECT_EQ(status["lastFailure"]["message"],
            "kubetrain: error: unknown model 'xyz' (known: cnn, mlp)");
  EXPECT_THAT((*FindCondition(status, kCondFailed))["message"].get<std::string>(),
              HasSubstr("[ConfigError]: kubetrain: error: unknown model 'xyz'"));
  EXPECT_EQ(status.value("restartCount", 0), 0) << "no retries";
}

// A container that cannot start (its image cannot be pulled) is reported in
// lastFailure and one Event, and left Pending for the kubelet to retry.
TEST_F(ControllerTest, AnImageThatCannotBePulledIsReportedOnce) {
  StartController();
  CreateJob(MakeJob("img", 0, 1));
  ASSERT_TRUE(WaitForPods("img", 1));
  const Json waiting{
      {"phase", "Pending"},
      {"containerStatuses",
       Json::array({{{"name", "kubetrain"},
                     {"state",
                      {{"waiting",
                        {{"reason", "ImagePullBackOff"},
                         {"message", "Back-off pulling image \"kubetrain:nope\""}}}}},
                     {"restartCount", 0}}})}};
  PatchPodStatus("img-worker-0", waiting);
  ASSERT_TRUE(WaitFor([&] {
    return kube::StringAt(Status("img"), {"lastFailure", "reason"}) == "ImagePullBackOff";
  }));
  EXPECT_TRUE(WaitForEvent("img", "ImagePullBackOff"));
  // Reported again by later passes? No: one event, one count.
  PatchPodStatus("img-worker-0", Json{{"message", "still pulling"}});
  ASSERT_TRUE(WaitFor([&] { return metrics_.Get("failure:ImagePullBackOff") >= 1; }));
  EXPECT_EQ(metrics_.Get("failure:ImagePullBackOff"), 1);
  EXPECT_FALSE(IsFinished(Status("img")));
  EXPECT_EQ(Pods("img").size(), 1u);
}

TEST_F(ControllerTest, NeverPolicyFailsOnAnyFailure) {
  StartController();
  CreateJob(MakeJob("nv", 0, 2));
  ASSERT_TRUE(WaitForPods("nv", 2));
  SetAllRunning("nv");
  SetPodFailed("nv-worker-1", 137);
  ASSERT_TRUE(WaitForCondition("nv", kCondFailed));
  EXPECT_EQ((*FindCondition(Status("nv"), kCondFailed))["reason"], "ReplicaFailed");
  EXPECT_TRUE(WaitFor([&] { return metrics_.Get("failed") == 1; }));
  EXPECT_EQ(Status("nv").value("restartCount", 0), 0);
}

TEST_F(ControllerTest, BackoffLimitExhaustedByRecreationsAndInPlaceRestarts) {
  StartController();
  CreateJob(MakeJob("bo", 0, 1,
                    Json{{"spec",
                          {{"replicaSpecs", {{"Worker", {{"restartPolicy", "ExitCode"}}}}},
                           {"runPolicy", {{"backoffLimit", 1}}}}}}));
  ASSERT_TRUE(WaitForPods("bo", 1));
  SetPodFailed("bo-worker-0", 143);
  ASSERT_TRUE(WaitFor([&] { return Status("bo").value("restartCount", 0) == 1; }))
      << Status("bo").dump() << "\npod: " << Pods("bo").begin()->second.dump();
  ASSERT_TRUE(WaitFor([&] {
    auto pods = Pods("bo");
    return pods.count("bo-worker-0") &&
           kube::StringAt(pods["bo-worker-0"], {"status", "phase"}) == "Pending";
  }));
  SetPodFailed("bo-worker-0", 143);
  ASSERT_TRUE(WaitForCondition("bo", kCondFailed));
  EXPECT_EQ((*FindCondition(Status("bo"), kCondFailed))["reason"], "BackoffLimitExceeded");

  // OnFailure: the kubelet restarts in place; container restarts count.
  CreateJob(MakeJob("of", 0, 1,
                    Json{{"spec",
                          {{"replicaSpecs", {{"Worker", {{"restartPolicy", "OnFailure"}}}}},
                           {"runPolicy", {{"backoffLimit", 2}}}}}}));
  ASSERT_TRUE(WaitForPods("of", 1));
  EXPECT_EQ(Pods("of")["of-worker-0"]["spec"]["restartPolicy"], "OnFailure");
  SetPodRunning("of-worker-0", 2);
  ASSERT_TRUE(WaitFor([&] { return Status("of").value("restartCount", 0) == 2; }));
  EXPECT_FALSE(IsFinished(Status("of")));
  SetPodRunning("of-worker-0", 3);
  ASSERT_TRUE(WaitForCondition("of", kCondFailed));
  EXPECT_EQ((*FindCondition(Status("of"), kCondFailed))["reason"], "BackoffLimitExceeded");
}

// The first pass can meet a pod that has already failed, before any status
// (replicaStatuses) was written: the restart must be counted, not crash the
// worker thread (it once threw from nlohmann's value() on null).
TEST_F(ControllerTest, PodFailedBeforeTheFirstStatusIsRestarted) {
  const Json job_json = CreateJob(
      MakeJob("early", 0, 1,
              Json{{"spec", {{"replicaSpecs", {{"Worker", {{"restartPolicy", "ExitCode"}}}}}}}}));
  absl::StatusOr<api::TrainingJob> job = api::FromJson(job_json);
  ASSERT_TRUE(job.ok()) << job.status();
  api::ApplyDefaults(*job);
  // The pod as the operator would have made it, already failed with a
  // retryable code, before any operator ran.
  ASSERT_TRUE(client()
                  .Create(kube::kPods, ns(),
                          BuildPod(*job, job_json, api::ReplicaType::kWorker, 0, BuildOptions{}))
                  .ok());
  SetPodFailed("early-worker-0", 137, "OOMKilled");
  const std::string old_uid = kube::Uid(Pods("early")["early-worker-0"]);
  StartController();
  ASSERT_TRUE(WaitFor([&] { return Status("early").value("restartCount", 0) == 1; }))
      << Status("early").dump();
  EXPECT_EQ(Status("early")["replicaStatuses"]["Worker"]["restarts"], 1);
  ASSERT_TRUE(WaitFor([&] {
    auto pods = Pods("early");
    return pods.count("early-worker-0") && kube::Uid(pods["early-worker-0"]) != old_uid;
  }));
  EXPECT_FALSE(IsFinished(Status("early")));
}

TEST_F(ControllerTest, DeadlineFiresWithNoOtherEvent) {
  StartController();
  // startTime has whole seconds, so the deadline fires 4-5 s after start:
  // room to see Running first on a loaded machine.
  CreateJob(MakeJob("dl", 1, 1, Json{{"spec", {{"runPolicy", {{"activeDeadlineSeconds", 5}}}}}}));
  ASSERT_TRUE(WaitForPods("dl", 2));
  SetAllRunning("dl");
  ASSERT_TRUE(WaitForCondition("dl", kCondRunning));
  // Nothing else happens; the delayed requeue must fire on its own.
  ASSERT_TRUE(WaitForCondition("dl", kCondFailed, absl::Seconds(20)));
  EXPECT_EQ((*FindCondition(Status("dl"), kCondFailed))["reason"], "DeadlineExceeded");
  ASSERT_TRUE(WaitFor([&] { return Pods("dl").empty(); }));
}

TEST_F(ControllerTest, TtlDeletesFinishedJob) {
  StartController();
  CreateJob(
      MakeJob("ttl", 0, 1, Json{{"spec", {{"runPolicy", {{"ttlSecondsAfterFinished", 1}}}}}}));
  ASSERT_TRUE(WaitForPods("ttl", 1));
  SetPodSucceeded("ttl-worker-0");
  ASSERT_TRUE(WaitForCondition("ttl", kCondSucceeded));
  // The TTL deletes with Foreground propagation: on a real API server the
  // job is gone only after kube-controller-manager's garbage collector has
  // deleted its pods, Services and Secret, which took 18-21 s on 2 loaded
  // cores (20 s is WaitFor's default).
  const absl::Duration gc = absl::Seconds(60);
  auto job_gone = [&] {
    return absl::IsNotFound(client().Get(kube::kTrainingJobs, ns(), "ttl").status());
  };
  ASSERT_TRUE(WaitFor(job_gone, gc));
  ASSERT_TRUE(WaitFor([&] { return Pods("ttl", /*all=*/true).empty(); }, gc))
      << "owned pods are garbage-collected with the job";
}

TEST_F(ControllerTest, SuspendDeletesPodsAndResumeRecreatesThem) {
  StartController();
  CreateJob(MakeJob("sus", 1, 2));
  ASSERT_TRUE(WaitForPods("sus", 3));
  SetAllRunning("sus");
  ASSERT_TRUE(WaitForCondition("sus", kCondRunning));
  ASSERT_TRUE(client()
                  .MergePatch(kube::kTrainingJobs, ns(), "sus",
                              Json{{"spec", {{"runPolicy", {{"suspend", true}}}}}})
                  .ok());
  ASSERT_TRUE(WaitForCondition("sus", kCondSuspended));
  ASSERT_TRUE(WaitFor([&] { return Pods("sus").empty(); }));
  EXPECT_FALSE(IsConditionTrue(Status("sus"), kCondRunning));
  ASSERT_TRUE(client()
                  .MergePatch(kube::kTrainingJobs, ns(), "sus",
                              Json{{"spec", {{"runPolicy", {{"suspend", false}}}}}})
                  .ok());
  ASSERT_TRUE(WaitForPods("sus", 3));
  ASSERT_TRUE(WaitFor([&] { return !IsConditionTrue(Status("sus"), kCondSuspended); }));
  EXPECT_TRUE(WaitForEvent("sus", "Resumed"));
}

// Suspend deletes the pods with their grace period; the job counts as
// Suspended only once they have ended, and status.lastCheckpoint holds the
// checkpoint the stopped worker reported in its termination message, read
// from the pod's last status even though the pod is gone by then.
TEST_F(ControllerTest, SuspendWaitsForThePodsAndRecordsTheirCheckpoint) {
  // A node for the pod: a bound pod is deleted gracefully (a kubelet stops it).
  const std::string node = absl::StrCat(ns(), "-ckpt");
  ASSERT_TRUE(
      client()
          .Create(kube::kNodes, "",
                  Json{{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", node}}}})
          .ok());
  struct DeleteNode {
    kube::KubeClient& client;
    std::string node;
    ~DeleteNode() { (void)client.Delete(kube::kNodes, "", node, kube::DeleteOptions{}); }
  } delete_node{client(), node};
  const std::string t = kube::FormatTime(absl::ToUnixMicros(absl::Now()));
  ASSERT_TRUE(client()
                  .MergePatch(kube::kNodes, "", node,
                              Json{{"status",
                                    {{"conditions", Json::array({{{"type", "Ready"},
                                                                  {"status", "True"},
                                                                  {"lastHeartbeatTime", t},
                                                                  {"lastTransitionTime", t}}})}}}},
                              "status")
                  .ok());
  StartController();
  CreateJob(MakeJob("ck", 0, 1));
  ASSERT_TRUE(WaitForPods("ck", 1));
  const Json binding{{"apiVersion", "v1"},
                     {"kind", "Binding"},
                     {"metadata", {{"name", "ck-worker-0"}, {"namespace", ns()}}},
                     {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
  ASSERT_TRUE(
      client().CreateSubresource(kube::kPods, ns(), "ck-worker-0", "binding", binding).ok());
  SetAllRunning("ck");
  ASSERT_TRUE(WaitForCondition("ck", kCondRunning));
  ASSERT_TRUE(client()
                  .MergePatch(kube::kTrainingJobs, ns(), "ck",
                              Json{{"spec", {{"runPolicy", {{"suspend", true}}}}}})
                  .ok());
  // The pod is being deleted, within its 30 s grace period: not suspended yet.
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<Json> pod = client().Get(kube::kPods, ns(), "ck-worker-0");
    return pod.ok() && kube::IsBeingDeleted(*pod);
  }));
  ASSERT_TRUE(WaitFor([&] { return !IsConditionTrue(Status("ck"), kCondRunning); }));
  EXPECT_FALSE(IsConditionTrue(Status("ck"), kCondSuspended));
  // The kubelet's stand-in: the runtime checkpointed and exited 143; its
  // final status, then the pod's removal.
  PatchPodStatus("ck-worker-0",
                 Json{{"phase", "Failed"},
                      {"containerStatuses",
                       Json::array({{{"name", "kubetrain"},
                                     {"ready", false},
                                     {"restartCount", 0},
                                     {"state",
                                      {{"terminated",
                                        {{"exitCode", 143},
                                         {"reason", "Error"},
                                         {"message",
                                          "kubetrain: checkpoint step=1200 "
                                          "path=/ckpt/ckpt-000000001200.ckpt\n"}}}}}}})}});
  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  ASSERT_TRUE(client().Delete(kube::kPods, ns(), "ck-worker-0", now).ok());
  ASSERT_TRUE(WaitForCondition("ck", kCondSuspended));
  const Json status = Status("ck");
  ASSERT_TRUE(status.contains("lastCheckpoint")) << status.dump();
  EXPECT_EQ(status["lastCheckpoint"]["step"], 1200);
  EXPECT_EQ(status["lastCheckpoint"]["replica"], "worker-0");
  EXPECT_EQ(status["lastCheckpoint"]["path"], "/ckpt/ckpt-000000001200.ckpt");
  bool named = false;
  for (const Json& c : status["conditions"]) {
    if (c["type"] == kCondSuspended) {
      EXPECT_EQ(c["message"],
                "TrainingJob ck is suspended with a checkpoint at step 1200 (worker-0).");
      named = true;
    }
  }
  EXPECT_TRUE(named) << status.dump();
  EXPECT_TRUE(WaitForEvent("ck", "Suspended"));
}

TEST_F(ControllerTest, CleanPodPolicyAllAndNone) {
  StartController();
  CreateJob(MakeJob("all", 1, 2, Json{{"spec", {{"runPolicy", {{"cleanPodPolicy", "All"}}}}}}));
  CreateJob(MakeJob("none", 1, 2, Json{{"spec", {{"runPolicy", {{"cleanPodPolicy", "None"}}}}}}));
  ASSERT_TRUE(WaitForPods("all", 3));
  ASSERT_TRUE(WaitForPods("none", 3));
  SetAllRunning("all");
  SetAllRunning("none");
  SetPodFailed("all-worker-1", 1);  // Never: the job fails; cleanup on failure too
  SetPodSucceeded("none-worker-0");
  ASSERT_TRUE(WaitForCondition("all", kCondFailed));
  ASSERT_TRUE(WaitForCondition("none", kCondSucceeded));
  ASSERT_TRUE(WaitFor([&] { return Pods("all").empty(); }));
  EXPECT_EQ(Pods("none").size(), 3u);
}

TEST_F(ControllerTest, ExternallyDeletedPodIsRecreatedNotCounted) {
  StartController();
  CreateJob(MakeJob("ext", 1, 1));
  ASSERT_TRUE(WaitForPods("ext", 2));
  std::string old_uid = kube::Uid(Pods("ext")["ext-worker-0"]);
  ASSERT_TRUE(client().Delete(kube::kPods, ns(), "ext-worker-0").ok());
  ASSERT_TRUE(WaitFor([&] {
    auto pods = Pods("ext");
    return pods.count("ext-worker-0") && kube::Uid(pods["ext-worker-0"]) != old_uid;
  }));
  EXPECT_EQ(Status("ext").value("restartCount", 0), 0);
  EXPECT_FALSE(IsFinished(Status("ext")));
}

TEST_F(ControllerTest, PerJobServiceModeMakesOneServiceAndPodHostnames) {
  StartController();
  CreateJob(MakeJob("pj", 1, 2, Json{{"spec", {{"serviceMode", "PerJob"}}}}));
  ASSERT_TRUE(WaitForPods("pj", 3));
  ASSERT_TRUE(WaitFor([&] { return Services("pj").count("pj") == 1; }));
  // The status is written once every create of the pass has been observed:
  // by then no per-replica Service can be on its way.
  ASSERT_TRUE(WaitForCondition("pj", kCondCreated));
  std::map<std::string, Json> services = Services("pj");
  ASSERT_EQ(services.size(), 1u) << "one headless Service for the whole job";
  const Json& svc = services["pj"];
  EXPECT_EQ(svc["spec"]["clusterIP"], "None");
  EXPECT_EQ(svc["spec"]["selector"], (Json{{"kubetrain.io/job-name", "pj"}}));
  EXPECT_EQ(svc["spec"]["publishNotReadyAddresses"], true);
  EXPECT_EQ(svc["spec"]["ports"][0]["port"], 2222);
  EXPECT_EQ(kube::ControllerUid(svc), kube::Uid(GetJob("pj")));

  const std::string& n = ns();
  const std::string cluster =
      absl::StrCat(R"({"ps":["pj-ps-0.pj.)", n, R"(.svc:2222"],"worker":["pj-worker-0.pj.)", n,
                   R"(.svc:2222","pj-worker-1.pj.)", n, R"(.svc:2222"]})");
  for (const auto& [name, pod] : Pods("pj")) {
    // <hostname>.<subdomain>.<ns>.svc is the address TF_CONFIG names.
    EXPECT_EQ(pod["spec"]["hostname"], name);
    EXPECT_EQ(pod["spec"]["subdomain"], "pj");
    EXPECT_THAT(EnvValue(pod, "TF_CONFIG"), HasSubstr(absl::StrCat(R"({"cluster":)", cluster)))
        << name;
  }
  EXPECT_EQ(EnvValue(Pods("pj")["pj-worker-1"], "KUBETRAIN_PS_HOSTS"),
            absl::StrCat("pj-ps-0.pj.", n, ".svc:2222"));
}

TEST_F(ControllerTest, CompletedWorkerIsNeverRunAgain) {
  StartController();
  CreateJob(MakeJob("done", 1, 2, Json{{"spec", {{"successPolicy", "AllWorkers"}}}}));
  ASSERT_TRUE(WaitForPods("done", 3));
  SetAllRunning("done");
  SetPodSucceeded("done-worker-1");
  ASSERT_TRUE(WaitFor([&] {
    // Null until the first status that counts the workers is written.
    Json rs = Status("done")["replicaStatuses"]["Worker"];
    return rs.is_object() && rs.value("succeeded", 0) == 1 && rs.contains("completedIndexes");
  }));
  EXPECT_EQ(Status("done")["replicaStatuses"]["Worker"]["completedIndexes"], Json::array({1}));
  // Someone deletes the completed pod: it stays gone, and it still counts.
  ASSERT_TRUE(client().Delete(kube::kPods, ns(), "done-worker-1").ok());
  ASSERT_TRUE(WaitFor([&] { return Pods("done", true).size() == 2; }));
  // An unrelated event (a label on the other pod): the job is reconciled
  // again, after the deletion.
  const int reconciles = metrics_.Get("reconciles");
  ASSERT_TRUE(client()
                  .MergePatch(kube::kPods, ns(), "done-worker-0",
                              Json{{"metadata", {{"labels", {{"touched", "yes"}}}}}})
                  .ok());
  ASSERT_TRUE(WaitFor([&] { return metrics_.Get("reconciles") > reconciles; }));
  EXPECT_EQ(Pods("done", true).count("done-worker-1"), 0u);
  EXPECT_EQ(Status("done")["replicaStatuses"]["Worker"]["succeeded"], 1);
  SetPodSucceeded("done-worker-0");
  ASSERT_TRUE(WaitForCondition("done", kCondSucceeded));
}

TEST_F(ControllerTest, InvalidSpecFailsAndCreatesNothing) {
  StartController();
  // The CRD's schema refuses a template without containers at the door, on
  // the emulator as on a real API server: nothing is stored.
  Json neg = MakeJob("neg", 0, 1);
  neg["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"] = Json::array();
  absl::StatusOr<Json> refused = client().Create(kube::kTrainingJobs, ns(), neg);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(kube::IsInvalid(refused.status())) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("spec.replicaSpecs.Worker.template.spec.containers"));
  EXPECT_TRUE(absl::IsNotFound(client().Get(kube::kTrainingJobs, ns(), "neg").status()));

  // PS without workers: only the CRD's CEL rules see that. A server that
  // evaluates them (Kubernetes >= 1.25) refuses it too; one that does not
  // (v1.20, the emulator) stores it, and the operator fails the job.
  Json bad = MakeJob("bad", 1, 0);
  absl::StatusOr<Json> created = client().Create(kube::kTrainingJobs, ns(), bad);
  if (!created.ok()) {
    EXPECT_TRUE(kube::IsInvalid(created.status())) << created.status();
    EXPECT_THAT(std::string(created.status().message()),
                HasSubstr("parameter servers need a Worker or Chief"));
    return;
  }
  ASSERT_TRUE(WaitForCondition("bad", kCondFailed));
  Json bad_status = Status("bad");
  const Json* c = FindCondition(bad_status, kCondFailed);
  EXPECT_EQ((*c)["reason"], "InvalidSpec");
  EXPECT_THAT((*c)["message"].get<std::string>(),
              HasSubstr("parameter servers need a Worker or Chief"));
  EXPECT_TRUE(Pods("bad", true).empty());
  EXPECT_TRUE(Services("bad").empty());
  EXPECT_TRUE(WaitForEvent("bad", "InvalidSpec"));
}

// The operator may only create Secrets (RBAC: no get/list/watch): it never
// reads one, creates the job's token Secret only while pods are missing, and
// takes AlreadyExists (a Secret of this job from an earlier pass or an
// earlier operator) as done, keeping that token.
TEST_F(ControllerTest, TokenSecretIsCreatedButNeverRead) {
  KT_REQUIRE_EMULATOR(target_);
  Json job = CreateJob(MakeJob("tok", 1, 2));
  const std::string secret_name =
      "tok-token-" + kube::StringAt(job, {"metadata", "uid"}).substr(0, 8);
  Json secret{{"apiVersion", "v1"}, {"kind", "Secret"}, {"type", "Opaque"}};
  secret["metadata"] = {{"name", secret_name},
                        {"namespace", ns()},
                        {"labels", {{"kubetrain.io/job-name", "tok"}}},
                        {"ownerReferences", Json::array({kube::ControllerReference(job)})}};
  secret["data"] = {{"token", "ZWFybGllcg=="}};  // "earlier"
  ASSERT_TRUE(client().Create(kube::kSecrets, ns(), secret).ok());
  const int posts_before = target_->emulator()->RequestCount("POST", "/secrets");

  StartController();
  ASSERT_TRUE(WaitForPods("tok", 3));
  EXPECT_TRUE(WaitForCondition("tok", kCondCreated));
  EXPECT_GE(target_->emulator()->RequestCount("POST", "/secrets"), posts_before + 1);
  absl::StatusOr<Json> kept = client().Get(kube::kSecrets, ns(), secret_name);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kube::StringAt(*kept, {"data", "token"}), "ZWFybGllcg==") << "AlreadyExists kept";

  // Every pod exists: later passes create no Secret.
  const int posts = target_->emulator()->RequestCount("POST", "/secrets");
  SetAllRunning("tok");
  ASSERT_TRUE(WaitForCondition("tok", kCondRunning));
  EXPECT_EQ(target_->emulator()->RequestCount("POST", "/secrets"), posts);
  // A replica's pod deleted: the pass that recreates it creates (tries to)
  // the Secret again, the job keeps running on the same token.
  ASSERT_TRUE(client().Delete(kube::kPods, ns(), "tok-worker-1").ok());
  ASSERT_TRUE(WaitFor([&] {
    return target_->emulator()->RequestCount("POST", "/secrets") > posts &&
           Pods("tok").count("tok-worker-1") == 1;
  }));
  kept = client().Get(kube::kSecrets, ns(), secret_name);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kube::StringAt(*kept, {"data", "token"}), "ZWFybGllcg==");
  // Never a GET (get, list or watch) on Secrets from the operator; the two
  // reads above are the test's own, through the emulator's Get.
  EXPECT_EQ(target_->emulator()->RequestCount("GET", "/secrets"), 2);
}

// A job deleted and created again under the same name must not inherit the
// old job's Secret (which garbage collection is removing, and which the
// operator, never reading Secrets, could not tell apart): the name carries
// the job's UID.
TEST_F(ControllerTest, ARecreatedJobGetsATokenSecretOfItsOwn) {
  StartController();
  Json first = CreateJob(MakeJob("again", 0, 1));
  ASSERT_TRUE(WaitForPods("again", 1));
  ASSERT_TRUE(client().Delete(kube::kTrainingJobs, ns(), "again").ok());
  ASSERT_TRUE(WaitFor(
      [&] { return absl::IsNotFound(client().Get(kube::kTrainingJobs, ns(), "again").status()); }));
  Json second = CreateJob(MakeJob("again", 0, 1));
  ASSERT_NE(kube::Uid(first), kube::Uid(second));
  const std::string name = "again-token-" + kube::Uid(second).substr(0, 8);
  ASSERT_TRUE(WaitFor([&] {
    std::map<std::string, Json> pods = Pods("again");
    return pods.count("again-worker-0") == 1 &&
           kube::ControllerUid(pods["again-worker-0"]) == kube::Uid(second);
  }));
  EXPECT_TRUE(client().Get(kube::kSecrets, ns(), name).ok()) << name;
  bool refers = false;
  // A named map: a range-for over an element of Pods()'s temporary would read
  // freed memory (the temporary dies before the loop runs).
  std::map<std::string, Json> pods = Pods("again");
  for (const Json& e : pods["again-worker-0"]["spec"]["containers"][0]["env"]) {
    if (e.value("name", "") == "KUBETRAIN_JOB_TOKEN") {
      refers = kube::StringAt(e, {"valueFrom", "secretKeyRef", "name"}) == name;
    }
  }
  EXPECT_TRUE(refers) << "the new job's pods read the new job's Secret, " << name << ": "
                      << pods["again-worker-0"]["spec"]["containers"][0]["env"].dump();
}

TEST_F(ControllerTest, RestartedOperatorMakesNoDuplicatesOrOrphans) {
  KT_REQUIRE_EMULATOR(target_);
  // The first operator dies mid-reconcile: some pod creates fail.
  target_->emulator()->InjectFault({.method = "POST",
                                    .path_substring = "/pods",
                                    .watch_only = false,
                                    .http_code = 500,
                                    .count = 2,
                                    .retry_after_seconds = 0});
  StartController();
  CreateJob(MakeJob("rs", 2, 4));
  ASSERT_TRUE(WaitFor([&] { return !Pods("rs").empty(); }));
  StopController();
  size_t before = Pods("rs").size();
  StartController();
  ASSERT_TRUE(WaitForPods("rs", 6)) << "had " << before;
  EXPECT_TRUE(WaitFor([&] { return Services("rs").size() == 6; }));
  // Every pod is owned by the job: no orphans; one per replica.
  Json job = GetJob("rs");
  std::set<std::string> names;
  for (const auto& [name, pod] : Pods("rs", true)) {
    EXPECT_EQ(kube::ControllerUid(pod), kube::Uid(job));
    names.insert(name);
  }
  EXPECT_EQ(names.size(), 6u);
  // A third operator on a fully reconciled job changes nothing.
  int creates = target_->emulator()->RequestCount("POST", "/pods");
  StopController();
  const int reconciles = metrics_.Get("reconciles");
  StartController();
  // Its first pass over the job (level-triggered: every cached job is queued
  // at start) has finished, and so have the requests it decided on.
  ASSERT_TRUE(WaitFor([&] { return metrics_.Get("reconciles") > reconciles; }));
  ASSERT_TRUE(WaitFor([&] { return plans_.Idle(); }));
  EXPECT_EQ(target_->emulator()->RequestCount("POST", "/pods"), creates);
}

TEST_F(ControllerTest, AnUnchangedStatusIsNotWrittenAgain) {
  KT_REQUIRE_EMULATOR(target_);
  StartController();
  CreateJob(MakeJob("calm", 1, 1));
  ASSERT_TRUE(WaitForPods("calm", 2));
  SetAllRunning("calm");
  ASSERT_TRUE(WaitForCondition("calm", kCondRunning));
  ASSERT_TRUE(WaitFor([&] { return plans_.Idle(); }));
  const int writes = target_->emulator()->RequestCount("PUT", "/trainingjobs/calm/status");
  // An event that changes nothing the status shows: a pass runs, decides
  // the same status, and writes nothing.
  const int reconciles = metrics_.Get("reconciles");
  ASSERT_TRUE(client()
                  .MergePatch(kube::kPods, ns(), "calm-worker-0",
                              Json{{"metadata", {{"labels", {{"touched", "yes"}}}}}})
                  .ok());
  ASSERT_TRUE(WaitFor([&] { return metrics_.Get("reconciles") > reconciles; }));
  ASSERT_TRUE(WaitFor([&] { return plans_.Idle(); }));
  EXPECT_EQ(target_->emulator()->RequestCount("PUT", "/trainingjobs/calm/status"), writes);
}

// Holds the pod creates it sees until Open().
class PodCreateGate final : public kube::HttpTransport {
 public:
  explicit PodCreateGate(std::unique_ptr<kube::HttpTransport> inner) : inner_(std::move(inner)) {}
  absl::StatusOr<kube::HttpResponse> Send(const kube::HttpRequest& request) override {
    const std::string path = request.target.substr(0, request.target.find('?'));
    if (request.method == "POST" && path.size() >= 5 &&
        path.compare(path.size() - 5, 5, "/pods") == 0) {
      absl::MutexLock lock(&mu_);
      ++held_;
      mu_.Await(absl::Condition(&open_));
    }
    return inner_->Send(request);
  }
  absl::StatusOr<kube::StreamResponse> OpenStream(const kube::HttpRequest& request,
                                                  absl::Duration idle_timeout) override {
    return inner_->OpenStream(request, idle_timeout);
  }
  std::string Server() const override { return inner_->Server(); }
  int held() const {
    absl::MutexLock lock(&mu_);
    return held_;
  }
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }

 private:
  const std::unique_ptr<kube::HttpTransport> inner_;
  mutable absl::Mutex mu_;
  int held_ ABSL_GUARDED_BY(mu_) = 0;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
};

TEST_F(ControllerTest, ReconcileHandsItsRequestsOverWithoutWaitingForThem) {
  absl::StatusOr<std::unique_ptr<kube::HttpTransport>> transport = target_->NewTransport();
  ASSERT_TRUE(transport.ok()) << transport.status();
  auto gate_owned = std::make_unique<PodCreateGate>(*std::move(transport));
  PodCreateGate* gate = gate_owned.get();
  kube::KubeClient gated(std::move(gate_owned));
  CountingMetrics metrics;
  ControllerOptions options;
  options.watch_namespace = ns();
  options.sync_timeout = absl::Seconds(20);
  options.progress_interval = absl::ZeroDuration();
  TrainingJobController controller(gated, options, &metrics, clock_, &logger_);
  ASSERT_TRUE(controller.Start().ok());
  CreateJob(MakeJob("gate", 1, 2));
  // The pass that decided on the pods has returned while its pod creates
  // are still held: the worker did not wait for them.
  ASSERT_TRUE(WaitFor([&] { return gate->held() >= 1; }));
  ASSERT_TRUE(WaitFor([&] { return metrics.Get("reconciles") >= 1; }));
  EXPECT_EQ(metrics.Get("pods"), 0);
  EXPECT_TRUE(Pods("gate").empty());
  // Passes that come meanwhile (the job's status, its Services) create no
  // pod twice: one create per replica once the gate opens.
  gate->Open();
  ASSERT_TRUE(WaitForPods("gate", 3));
  EXPECT_TRUE(WaitFor([&] { return metrics.Get("pods") == 3; }));
  EXPECT_TRUE(WaitFor([&] { return Services("gate").size() == 3; }));
  if (target_->emulator() != nullptr) {
    EXPECT_EQ(target_->emulator()->RequestCount("POST", "/pods"), 3);
  }
  EXPECT_EQ(gate->held(), 3);
  controller.Stop();
}

TEST_F(ControllerTest, TwoOperatorsWithLeaderElectionOnlyLeaderActs) {
  kube::LeaderElectionConfig config;
  config.lease_namespace = ns();
  config.lease_name = "kubetrain-operator";
  config.lease_duration = absl::Seconds(2);
  config.renew_deadline = absl::Milliseconds(1500);
  config.retry_period = absl::Milliseconds(200);
  struct Operator {
    CountingMetrics metrics;
    std::unique_ptr<TrainingJobController> controller;
    std::unique_ptr<kube::KubeClient> client;
    std::unique_ptr<kube::LeaderElector> elector;
    std::thread thread;
  };
  std::vector<std::unique_ptr<Operator>> ops;
  for (const char* id : {"op-a", "op-b"}) {
    auto op = std::make_unique<Operator>();
    op->controller = NewController(&op->metrics);
    op->client = *target_->NewClient();
    kube::LeaderElectionConfig c = config;
    c.identity = id;
    Operator* raw = op.get();
    op->elector = std::make_unique<kube::LeaderElector>(
        *op->client, c,
        kube::LeaderCallbacks{[raw] { ASSERT_TRUE(raw->controller->Start().ok()); },
                              [raw] { raw->controller->Stop(); }, nullptr},
        clock_, &logger_);
    op->thread = std::thread([raw] { (void)raw->elector->Run(); });
    ops.push_back(std::move(op));
  }
  ASSERT_TRUE(WaitFor([&] { return ops[0]->elector->IsLeader() || ops[1]->elector->IsLeader(); }));
  CreateJob(MakeJob("le", 1, 2));
  ASSERT_TRUE(WaitForPods("le", 3));
  Operator& leader = ops[0]->elector->IsLeader() ? *ops[0] : *ops[1];
  Operator& standby = ops[0]->elector->IsLeader() ? *ops[1] : *ops[0];
  // The counter moves after the API has answered the create.
  EXPECT_TRUE(WaitFor([&] { return leader.metrics.Get("pods") == 3; }));
  EXPECT_EQ(standby.metrics.Get("pods"), 0);
  EXPECT_EQ(standby.metrics.Get("reconciles"), 0);
  EXPECT_FALSE(standby.controller->Ready());
  // The leader stops: the standby takes over and carries on.
  leader.elector->Stop();
  ASSERT_TRUE(WaitFor([&] { return standby.elector->IsLeader(); }));
  ASSERT_TRUE(WaitFor([&] { return standby.controller->Ready(); }));
  SetPodSucceeded("le-worker-0");
  ASSERT_TRUE(WaitForCondition("le", kCondSucceeded));
  EXPECT_TRUE(WaitFor([&] { return standby.metrics.Get("reconciles") > 0; }));
  for (auto& op : ops) {
    op->elector->Stop();
    op->thread.join();
    op->controller->Stop();
  }
}

// A signal can arrive while Start() still waits for the informers: Stop()
// must end that wait, and nothing may start afterwards (a worker or stats
// thread left running would abort the process at exit).
TEST_F(ControllerTest, StopWhileStartWaitsForInformersCancelsStart) {
  KT_REQUIRE_EMULATOR(target_);
  // The TrainingJob list fails until the test ends, so Start() cannot sync.
  testing::FaultRule never_lists;
  never_lists.method = "GET";
  never_lists.path_substring = "/trainingjobs";
  never_lists.http_code = 503;
  never_lists.count = 1000000;
  target_->emulator()->InjectFault(never_lists);
  CountingMetrics metrics;
  std::unique_ptr<TrainingJobController> controller = NewController(&metrics);
  absl::Status started = absl::UnknownError("Start() has not returned");
  std::atomic<bool> returned{false};
  std::thread starter([&] {
    started = controller->Start();
    returned = true;
  });
  ASSERT_TRUE(
      WaitFor([&] { return target_->emulator()->RequestCount("GET", "/trainingjobs") > 0; }));
  EXPECT_FALSE(returned.load());
  controller->Stop();
  ASSERT_TRUE(WaitFor([&] { return returned.load(); }));
  starter.join();
  EXPECT_TRUE(absl::IsCancelled(started)) << started;
  EXPECT_FALSE(controller->Ready());
  EXPECT_TRUE(absl::IsCancelled(controller->Start()));
  controller.reset();  // must not abort: no thread was left joinable
  EXPECT_EQ(metrics.Get("reconciles"), 0);
}

TEST_F(ControllerTest, StopBeforeStartMeansNeverStart) {
  CountingMetrics metrics;
  std::unique_ptr<TrainingJobController> controller = NewController(&metrics);
  controller->Stop();
  EXPECT_TRUE(absl::IsCancelled(controller->Start()));
  CreateJob(MakeJob("never", 0, 1));
  EXPECT_FALSE(controller->Ready());
  controller.reset();
  EXPECT_TRUE(Pods("never").empty());
}

// A Start() that gives up on an informer (here: PodGroups that never list,
// as on a cluster without Volcano's CRD) leaves the job informer queueing
// work with no worker to take it. Stop() must still return promptly; it
// used to wait for that queue to drain, forever (controller_test then ran
// into its CTest timeout against a real server without the PodGroup CRD).
TEST_F(ControllerTest, StopAfterAFailedStartReturns) {
  KT_REQUIRE_EMULATOR(target_);
  CreateJob(MakeJob("queued", 0, 1));
  target_->emulator()->InjectFault(
      {.method = "GET", .path_substring = "/podgroups", .http_code = 503, .count = 1000000});
  absl::StatusOr<std::unique_ptr<kube::KubeClient>> client = target_->NewClient();
  ASSERT_TRUE(client.ok()) << client.status();
  ControllerOptions options;
  options.watch_namespace = ns();
  options.gang_scheduler = "volcano";
  options.sync_timeout = absl::Seconds(1);
  TrainingJobController controller(**client, options, &metrics_, clock_, &logger_);
  absl::Status started = controller.Start();
  EXPECT_TRUE(absl::IsDeadlineExceeded(started)) << started;
  EXPECT_THAT(std::string(started.message()), HasSubstr("podgroups informer did not sync"));
  controller.Stop();
  EXPECT_FALSE(controller.Ready());
  EXPECT_TRUE(Pods("queued", true).empty());
}

TEST_F(ControllerTest, GangSchedulingCreatesPodGroup) {
  ControllerOptions options;
  options.gang_scheduler = "volcano";
  StartController(options);
  CreateJob(MakeJob(
      "gang", 1, 2,
      Json{{"spec",
            {{"runPolicy", {{"schedulingPolicy", {{"minAvailable", 3}, {"queue", "q1"}}}}}}}}));
  ASSERT_TRUE(WaitForPods("gang", 3));
  absl::StatusOr<Json> group = client().Get(kube::kPodGroups, ns(), "gang");
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ((*group)["spec"]["minMember"], 3);
  EXPECT_EQ((*group)["spec"]["queue"], "q1");
  Json pod = Pods("gang")["gang-worker-0"];
  EXPECT_EQ(pod["spec"]["schedulerName"], "volcano");
  EXPECT_EQ(kube::Annotation(pod, "scheduling.k8s.io/group-name"), "gang");
}

}  // namespace
}  // namespace kubetrain::controller
