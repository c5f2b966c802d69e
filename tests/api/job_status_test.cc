#include "api/job_status.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace kubetrain::api {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// A status as the operator and the progress poller write it, every field set.
constexpr char kFullStatus[] = R"({
  "completionTime": "2026-11-22T00:10:00Z",
  "conditions": [
    {"lastTransitionTime": "2026-11-22T00:00:00Z", "lastUpdateTime": "2026-11-22T00:00:00Z",
     "message": "TrainingJob fmnist is created.", "reason": "TrainingJobCreated",
     "status": "True", "type": "Created"},
    {"lastTransitionTime": "2026-11-22T00:01:00Z", "lastUpdateTime": "2026-11-22T00:02:00Z",
     "message": "", "reason": "JobFailed", "status": "False", "type": "Running"},
    {"lastTransitionTime": "2026-11-22T00:10:00Z", "lastUpdateTime": "2026-11-22T00:10:00Z",
     "message": "worker-0 exited with code 1", "reason": "ReplicaFailed", "status": "True",
     "type": "Failed"}
  ],
  "disruptionCount": 2,
  "generation": 4,
  "lastFailure": {"exitCode": 1, "message": "kubetrain: error: unknown model", "node": "node-b",
                  "pod": "fmnist-worker-0", "podUID": "uid-7", "reason": "ConfigError",
                  "replicaIndex": 0, "replicaType": "Worker", "time": "2026-11-22T00:10:00Z"},
  "lastReconcileTime": "2026-11-22T00:10:01Z",
  "progress": {"accuracy": 0.75, "loss": 0.5, "samplesPerSecond": 1234.5, "step": 4120,
               "totalSteps": 10000, "updatedAt": "2026-11-22T00:09:30Z"},
  "replicaStatuses": {
    "PS": {"active": 1, "failed": 0, "ready": 1, "restarts": 0, "succeeded": 0,
           "selector": "kubetrain.io/job-name=fmnist,kubetrain.io/replica-type=ps"},
    "Worker": {"active": 1, "completedIndexes": [1, 3], "failed": 1, "ready": 0, "restarts": 3,
               "succeeded": 2,
               "selector": "kubetrain.io/job-name=fmnist,kubetrain.io/replica-type=worker"}
  },
  "restartCount": 4,
  "startTime": "2026-11-22T00:00:30Z",
  "worldSize": 3
})";

JobStatus Parse(const json& j) {
  absl::StatusOr<JobStatus> s = StatusFromJson(j);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : JobStatus{};
}

TEST(JobStatusTest, ReadsEveryField) {
  const JobStatus s = Parse(json::parse(kFullStatus));
  ASSERT_EQ(s.conditions.size(), 3u);
  EXPECT_EQ(s.conditions[0], (Condition{kCondCreated, ConditionStatus::kTrue, "TrainingJobCreated",
                                        "TrainingJob fmnist is created.", "2026-11-22T00:00:00Z",
                                        "2026-11-22T00:00:00Z"}));
  EXPECT_EQ(s.conditions[1].status, ConditionStatus::kFalse);
  EXPECT_EQ(s.conditions[1].last_update_time, "2026-11-22T00:02:00Z");
  EXPECT_EQ(s.conditions[1].last_transition_time, "2026-11-22T00:01:00Z");
  EXPECT_EQ(s.conditions[2].type, kCondFailed);

  ASSERT_EQ(s.replica_statuses.size(), 2u);
  const ReplicaStatus& w = s.replica_statuses.at(ReplicaType::kWorker);
  EXPECT_EQ(w.active, 1);
  EXPECT_EQ(w.ready, 0);
  EXPECT_EQ(w.succeeded, 2);
  EXPECT_EQ(w.failed, 1);
  EXPECT_EQ(w.restarts, 3);
  EXPECT_EQ(w.completed_indexes, (std::set<int32_t>{1, 3}));
  EXPECT_EQ(w.selector, "kubetrain.io/job-name=fmnist,kubetrain.io/replica-type=worker");
  EXPECT_EQ(s.replica_statuses.at(ReplicaType::kPS).ready, 1);

  EXPECT_EQ(s.restart_count, 4);
  EXPECT_EQ(s.disruption_count, 2);
  ASSERT_TRUE(s.last_failure.has_value());
  EXPECT_EQ(s.last_failure->replica_type, ReplicaType::kWorker);
  EXPECT_EQ(s.last_failure->replica_index, 0);
  EXPECT_EQ(s.last_failure->pod, "fmnist-worker-0");
  EXPECT_EQ(s.last_failure->pod_uid, "uid-7");
  EXPECT_EQ(s.last_failure->node, "node-b");
  EXPECT_EQ(s.last_failure->exit_code, 1);
  EXPECT_EQ(s.last_failure->reason, "ConfigError");
  EXPECT_EQ(s.last_failure->message, "kubetrain: error: unknown model");
  EXPECT_EQ(s.last_failure->time, "2026-11-22T00:10:00Z");
  EXPECT_EQ(s.start_time, "2026-11-22T00:00:30Z");
  EXPECT_EQ(s.completion_time, "2026-11-22T00:10:00Z");
  EXPECT_EQ(s.last_reconcile_time, "2026-11-22T00:10:01Z");
  ASSERT_TRUE(s.progress.has_value());
  EXPECT_EQ(s.progress->step, 4120);
  EXPECT_EQ(s.progress->total_steps, 10000);
  EXPECT_EQ(s.progress->loss, 0.5);
  EXPECT_EQ(s.progress->accuracy, 0.75);
  EXPECT_EQ(s.progress->samples_per_second, 1234.5);
  EXPECT_EQ(s.progress->updated_at, "2026-11-22T00:09:30Z");
  EXPECT_EQ(s.world_size, 3);
  EXPECT_EQ(s.generation, 4);

  EXPECT_EQ(Phase(s), kCondFailed);
  EXPECT_TRUE(IsConditionTrue(s, kCondCreated));
  EXPECT_FALSE(IsConditionTrue(s, kCondRunning));
  EXPECT_EQ(FindCondition(s, kCondRunning), &s.conditions[1]);
  EXPECT_EQ(FindCondition(s, kCondSucceeded), nullptr);
}

// What clients see stays byte for byte what was stored.
TEST(JobStatusTest, WritesBackByteForByte) {
  const json stored = json::parse(kFullStatus);
  EXPECT_EQ(StatusToJson(Parse(stored)).dump(), stored.dump());

  // What a pod deleted by the control plane leaves: no exitCode; a pod
  // with no uid known: no podUID; the node even when empty.
  const json deleted = json::parse(R"({"lastFailure": {"message": "preempted", "node": "",
      "pod": "j-worker-1", "reason": "Preempted", "replicaIndex": 1, "replicaType": "Worker",
      "time": "2026-11-22T00:10:00Z"}, "disruptionCount": 1})");
  EXPECT_EQ(StatusToJson(Parse(deleted)).dump(), deleted.dump());

  // A progress that only has some metrics keeps only those.
  const json partial = json::parse(R"({"progress": {"step": 7}})");
  EXPECT_EQ(StatusToJson(Parse(partial)).dump(), partial.dump());
  const json only_time = json::parse(R"({"progress": {"updatedAt": "2026-11-22T00:00:00Z"}})");
  EXPECT_EQ(StatusToJson(Parse(only_time)).dump(), only_time.dump());
}

// The status every field of which the CRD tests check against the schema
// (tests/packaging/crd.test.mjs), as the operator writes it.
TEST(JobStatusTest, TheOperatorsStatusFixtureRoundTrips) {
  std::ifstream in(KUBETRAIN_STATUS_FIXTURE);
  ASSERT_TRUE(in) << KUBETRAIN_STATUS_FIXTURE;
  const json stored = json::parse(in);
  const JobStatus s = Parse(stored);
  EXPECT_EQ(s.conditions.size(), 3u);
  EXPECT_EQ(s.replica_statuses.size(), 2u);
  EXPECT_EQ(s.last_failure->exit_code, 137);
  EXPECT_EQ(s.last_checkpoint->step, 1200);
  EXPECT_EQ(s.last_checkpoint->replica, "worker-0");
  EXPECT_EQ(StatusToJson(s).dump(), stored.dump());
}

TEST(JobStatusTest, EmptiesAreOmitted) {
  EXPECT_EQ(StatusToJson(JobStatus{}), json::object());
  JobStatus s;
  s.restart_count = 0;  // set: written even when 0
  s.replica_statuses[ReplicaType::kChief] = ReplicaStatus{};
  s.last_failure = LastFailure{};
  s.progress = Progress{};
  EXPECT_EQ(StatusToJson(s), json::parse(R"({
    "restartCount": 0,
    "replicaStatuses": {"Chief": {"active": 0, "ready": 0, "succeeded": 0, "failed": 0,
                                  "restarts": 0, "selector": ""}},
    "lastFailure": {"replicaType": "Worker", "replicaIndex": 0, "pod": "", "node": "",
                    "reason": "", "message": "", "time": ""},
    "progress": {}
  })"));
  Condition c;
  c.type = kCondRunning;
  s = JobStatus{};
  s.conditions.push_back(c);
  EXPECT_EQ(StatusToJson(s)["conditions"][0],
            json::parse(R"({"type": "Running", "status": "Unknown", "reason": "", "message": "",
                            "lastUpdateTime": "", "lastTransitionTime": ""})"));
}

TEST(JobStatusTest, AbsentNullAndEmptyReadAsEmpty) {
  EXPECT_EQ(Parse(json()), JobStatus{});
  EXPECT_EQ(Parse(json::object()), JobStatus{});
  EXPECT_EQ(Parse(json{{"conditions", nullptr},
                       {"restartCount", nullptr},
                       {"lastFailure", nullptr},
                       {"progress", nullptr}}),
            JobStatus{});
  const JobStatus s = Parse(json{{"replicaStatuses", {{"Worker", json::object()}}}});
  EXPECT_EQ(s.replica_statuses.at(ReplicaType::kWorker), ReplicaStatus{});
}

TEST(JobStatusTest, UnknownFieldsAreIgnored) {
  json j = json::parse(kFullStatus);
  j["observedGeneration"] = 3;
  j["conditions"][0]["observedGeneration"] = 3;
  j["replicaStatuses"]["Worker"]["labelSelector"] = {{"matchLabels", json::object()}};
  j["lastFailure"]["container"] = "trainer";
  j["progress"]["epoch"] = 2;
  EXPECT_EQ(Parse(j), Parse(json::parse(kFullStatus)));
  EXPECT_EQ(StatusToJson(Parse(j)).dump(), json::parse(kFullStatus).dump());
}

// A loss the API server re-serialised as an integer (Go writes 1.0 as 1)
// reads as the same number.
TEST(JobStatusTest, IntegerValuedNumbersReadAsNumbers) {
  const JobStatus s = Parse(json::parse(R"({"progress": {"loss": 1, "accuracy": 0}})"));
  EXPECT_EQ(s.progress->loss, 1.0);
  EXPECT_EQ(s.progress->accuracy, 0.0);
}

std::string Error(const std::string& text) {
  absl::StatusOr<JobStatus> s = StatusFromJson(json::parse(text));
  EXPECT_FALSE(s.ok()) << text;
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << text;
  return std::string(s.status().message());
}

TEST(JobStatusTest, MalformedInputIsAnErrorNamingTheField) {
  EXPECT_EQ(Error(R"([])"), "status: must be a mapping, got a list");
  EXPECT_EQ(Error(R"({"conditions": {}})"), "status.conditions: must be a list, got a mapping");
  EXPECT_EQ(Error(R"({"conditions": [3]})"), "status.conditions[0]: must be a mapping, got 3");
  EXPECT_EQ(Error(R"({"conditions": [{"type": "Running", "status": "Yes"}]})"),
            "status.conditions[0].status: must be one of True, False, Unknown, got \"Yes\"");
  EXPECT_EQ(Error(R"({"conditions": [{"type": 1}]})"),
            "status.conditions[0].type: must be a string, got 1");
  EXPECT_EQ(Error(R"({"replicaStatuses": {"Driver": {}}})"),
            "status.replicaStatuses.Driver: unknown replica type (PS, Worker, Chief, Evaluator)");
  EXPECT_EQ(Error(R"({"replicaStatuses": {"Worker": {"active": "1"}}})"),
            "status.replicaStatuses.Worker.active: must be an integer, got \"1\"");
  EXPECT_EQ(Error(R"({"replicaStatuses": {"Worker": {"restarts": 4294967296}}})"),
            "status.replicaStatuses.Worker.restarts: out of range, got 4294967296");
  EXPECT_EQ(Error(R"({"replicaStatuses": {"Worker": {"completedIndexes": [0, "x"]}}})"),
            "status.replicaStatuses.Worker.completedIndexes[1]: must be an integer, got \"x\"");
  EXPECT_EQ(Error(R"({"restartCount": 1.5})"), "status.restartCount: must be an integer, got 1.5");
  EXPECT_EQ(Error(R"({"lastFailure": {"replicaType": "Driver"}})"),
            "status.lastFailure.replicaType: must be one of PS, Worker, Chief, Evaluator, got "
            "\"Driver\"");
  EXPECT_EQ(Error(R"({"lastFailure": {"exitCode": "1"}})"),
            "status.lastFailure.exitCode: must be an integer, got \"1\"");
  EXPECT_EQ(Error(R"({"progress": {"loss": "low"}})"),
            "status.progress.loss: must be a number, got \"low\"");
  EXPECT_EQ(Error(R"({"startTime": 5})"), "status.startTime: must be a string, got 5");
}

TEST(JobStatusTest, ConditionStatusNames) {
  for (ConditionStatus s :
       {ConditionStatus::kTrue, ConditionStatus::kFalse, ConditionStatus::kUnknown}) {
    EXPECT_EQ(ParseConditionStatus(ConditionStatusName(s)), s);
  }
  EXPECT_EQ(ParseConditionStatus("true"), std::nullopt);  // exact, as the CRD's enum
}

TEST(JobStatusTest, PhaseIsTheLastTrueCondition) {
  JobStatus s;
  EXPECT_EQ(Phase(s), "");
  for (auto [type, status] : {std::pair{kCondCreated, ConditionStatus::kTrue},
                              std::pair{kCondRunning, ConditionStatus::kTrue},
                              std::pair{kCondStalled, ConditionStatus::kFalse}}) {
    Condition c;
    c.type = type;
    c.status = status;
    s.conditions.push_back(c);
  }
  EXPECT_EQ(Phase(s), kCondRunning);
}

TEST(JobStatusTest, ProgressToJsonIsThePatchBody) {
  Progress p;
  p.step = 3;
  p.samples_per_second = 2.5;
  EXPECT_EQ(ProgressToJson(p), json::parse(R"({"step": 3, "samplesPerSecond": 2.5})"));
}

}  // namespace
}  // namespace kubetrain::api
