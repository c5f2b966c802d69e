#include "tests/operator/controller/controller_fixture.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "operator/controller/job_status.h"
#include "operator/kube/object.h"
#include "operator/kube/resource.h"
#include "tests/support/wait_for.h"

namespace kubetrain::controller {

void ControllerFixture::SetUp() {
  absl::StatusOr<std::unique_ptr<testing::KubeTestTarget>> target =
      testing::KubeTestTarget::Create();
  ASSERT_TRUE(target.ok()) << target.status();
  target_ = *std::move(target);
}

void ControllerFixture::TearDown() { StopController(); }

std::unique_ptr<TrainingJobController> ControllerFixture::NewController(OperatorMetrics* metrics,
                                                                        ControllerOptions options) {
  absl::StatusOr<std::unique_ptr<kube::KubeClient>> client = target_->NewClient();
  EXPECT_TRUE(client.ok());
  options.watch_namespace = ns();
  options.sync_timeout = absl::Seconds(20);
  if (options.action_observer == nullptr) options.action_observer = &plans_;
  kube::KubeClient* raw = client->get();
  clients_.push_back(*std::move(client));
  return std::make_unique<TrainingJobController>(*raw, options, metrics, clock_, &logger_);
}

void ControllerFixture::StartController(ControllerOptions options) {
  controller_ = NewController(&metrics_, options);
  absl::Status started = controller_->Start();
  ASSERT_TRUE(started.ok()) << started;
}

void ControllerFixture::StopController() {
  if (controller_) controller_->Stop();
  controller_.reset();
}

Json ControllerFixture::MakeJob(const std::string& name, int ps, int workers, const Json& patch) {
  auto replica = [](int n) {
    Json container{{"name", "kubetrain"}, {"image", "kubetrain:test"}};
    container["args"] = Json::array({"train"});
    Json spec;
    spec["replicas"] = n;
    spec["template"]["spec"]["containers"] = Json::array({container});
    return spec;
  };
  Json job{{"apiVersion", "kubetrain.io/v1alpha1"},
           {"kind", "TrainingJob"},
           {"metadata", {{"name", name}, {"namespace", ns()}}},
           {"spec", {{"replicaSpecs", Json::object()}}}};
  if (ps > 0) job["spec"]["replicaSpecs"]["PS"] = replica(ps);
  if (workers > 0) job["spec"]["replicaSpecs"]["Worker"] = replica(workers);
  job.merge_patch(patch);
  return job;
}

namespace {

api::JobStatus Typed(const Json& status) {
  absl::StatusOr<api::JobStatus> typed = api::StatusFromJson(status);
  EXPECT_TRUE(typed.ok()) << typed.status() << ": " << status.dump();
  return typed.ok() ? *std::move(typed) : api::JobStatus{};
}

}  // namespace

const Json* FindCondition(const Json& status, const std::string& type) {
  if (!status.is_object() || !status.contains("conditions")) return nullptr;
  for (const Json& c : status["conditions"]) {
    if (c.value("type", "") == type) return &c;
  }
  return nullptr;
}

bool IsConditionTrue(const Json& status, const std::string& type) {
  return api::IsConditionTrue(Typed(status), type);
}

bool IsFinished(const Json& status) { return IsFinished(Typed(status)); }

std::string Phase(const Json& status) { return api::Phase(Typed(status)); }

std::string EnvValue(const Json& pod, const std::string& name) {
  for (const Json& e : pod["spec"]["containers"][0]["env"]) {
    if (e.value("name", "") == name) return e.value("value", "");
  }
  return "<absent>";
}

Json ControllerFixture::CreateJob(const Json& job) {
  absl::StatusOr<Json> created = client().Create(kube::kTrainingJobs, ns(), job);
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? *created : Json();
}

Json ControllerFixture::GetJob(const std::string& name) {
  absl::StatusOr<Json> job = client().Get(kube::kTrainingJobs, ns(), name);
  return job.ok() ? *job : Json();
}

Json ControllerFixture::Status(const std::string& name) {
  Json job = GetJob(name);
  return job.is_object() && job.contains("status") ? job["status"] : Json::object();
}

std::map<std::string, Json> ControllerFixture::Pods(const std::string& job, bool all) {
  std::map<std::string, Json> out;
  kube::ListOptions options;
  options.label_selector = absl::StrCat("kubetrain.io/job-name=", job);
  absl::StatusOr<kube::ObjectList> list = client().ListAll(kube::kPods, ns(), options);
  if (!list.ok()) return out;
  for (Json& pod : list->items) {
    if (!all && kube::IsBeingDeleted(pod)) continue;
    std::string name = kube::Name(pod);  // before the move: json's operator= takes by value
    out[name] = std::move(pod);
  }
  return out;
}

std::map<std::string, Json> ControllerFixture::Services(const std::string& job) {
  std::map<std::string, Json> out;
  kube::ListOptions options;
  options.label_selector = absl::StrCat("kubetrain.io/job-name=", job);
  absl::StatusOr<kube::ObjectList> list = client().ListAll(kube::kServices, ns(), options);
  if (!list.ok()) return out;
  for (Json& svc : list->items) {
    std::string name = kube::Name(svc);
    out[name] = std::move(svc);
  }
  return out;
}

namespace {

using ::kubetrain::testing_util::WaitFor;

Json ContainerStatus(const Json& state, int restarts) {
  return Json::array({{{"name", "kubetrain"},
                       {"state", state},
                       {"ready", state.contains("running")},
                       {"restartCount", restarts},
                       {"image", "kubetrain:test"},
                       {"imageID", ""}}});
}

}  // namespace

void ControllerFixture::SetPodRunning(const std::string& pod, int restart_count) {
  Json status{
      {"phase", "Running"},
      {"podIP", "127.0.0.1"},
      {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})},
      {"containerStatuses",
       ContainerStatus(Json{{"running", {{"startedAt", "2026-11-22T00:00:00Z"}}}}, restart_count)}};
  absl::StatusOr<Json> patched =
      client().MergePatch(kube::kPods, ns(), pod, Json{{"status", status}}, "status");
  ASSERT_TRUE(patched.ok()) << patched.status();
}

void ControllerFixture::SetPodSucceeded(const std::string& pod) {
  Json status{
      {"phase", "Succeeded"},
      {"containerStatuses",
       ContainerStatus(Json{{"terminated", {{"exitCode", 0}, {"reason", "Completed"}}}}, 0)}};
  absl::StatusOr<Json> patched =
      client().MergePatch(kube::kPods, ns(), pod, Json{{"status", status}}, "status");
  ASSERT_TRUE(patched.ok()) << patched.status();
}

void ControllerFixture::SetPodFailed(const std::string& pod, int exit_code,
                                     const std::string& reason) {
  Json status{
      {"phase", "Failed"},
      {"containerStatuses",
       ContainerStatus(Json{{"terminated", {{"exitCode", exit_code}, {"reason", reason}}}}, 0)}};
  absl::StatusOr<Json> patched =
      client().MergePatch(kube::kPods, ns(), pod, Json{{"status", status}}, "status");
  ASSERT_TRUE(patched.ok()) << patched.status();
}

void ControllerFixture::PatchPodStatus(const std::string& pod, const Json& status) {
  absl::StatusOr<Json> patched =
      client().MergePatch(kube::kPods, ns(), pod, Json{{"status", status}}, "status");
  ASSERT_TRUE(patched.ok()) << patched.status();
}

void ControllerFixture::SetAllRunning(const std::string& job) {
  for (const auto& [name, pod] : Pods(job)) SetPodRunning(name);
}

bool ControllerFixture::WaitForPods(const std::string& job, size_t n) {
  return testing_util::WaitFor([&] { return Pods(job).size() == n; }, absl::Seconds(30));
}

bool ControllerFixture::WaitForCondition(const std::string& job, const std::string& type,
                                         absl::Duration timeout) {
  return testing_util::WaitFor([&] { return IsConditionTrue(Status(job), type); }, timeout);
}

std::vector<std::string> ControllerFixture::EventReasons(const std::string& job) {
  std::vector<std::string> out;
  absl::StatusOr<kube::ObjectList> list = client().ListAll(kube::kEvents, ns());
  if (!list.ok()) return out;
  for (const Json& e : list->items) {
    if (kube::StringAt(e, {"involvedObject", "name"}) == job) out.push_back(e.value("reason", ""));
  }
  return out;
}

bool ControllerFixture::WaitForEvent(const std::string& job, const std::string& reason) {
  return testing_util::WaitFor([&] {
    std::vector<std::string> reasons = EventReasons(job);
    return std::find(reasons.begin(), reasons.end(), reason) != reasons.end();
  });
}

}  // namespace kubetrain::controller
