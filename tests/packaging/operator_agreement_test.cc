// The operator's own validation (api: ParseTrainingJob, ApplyDefaults,
// Validate) and the CRD agree: every example is accepted, every job in
// tests/packaging/invalid-jobs is answered as its "# operator:" line says (the
// schema/CEL side is checked by crd.test.mjs against its "# expect:" line),
// the fields the operator knows at each level are the CRD's properties there,
// and the CRD's enums and defaults are the operator's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "api/training_job.h"
#include "base/yaml_json.h"

namespace kubetrain::api {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const fs::path kRoot = KUBETRAIN_SOURCE_DIR;

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<fs::path> YamlFiles(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string ext = e.path().extension().string();
    if (ext == ".yaml" || ext == ".yml") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

const json& Schema() {
  static const json* schema = [] {
    absl::StatusOr<json> crd =
        base::ParseYamlOrJson(Read(kRoot / "crds/kubetrain.io_trainingjobs.yaml"), "crd");
    if (!crd.ok()) {
      ADD_FAILURE() << crd.status();
      return new json(json::object());
    }
    return new json((*crd)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]);
  }();
  return *schema;
}

const json& SpecSchema() { return Schema()["properties"]["spec"]; }
const json& ReplicaSchema() {
  return SpecSchema()["properties"]["replicaSpecs"]["additionalProperties"];
}
const json& RunPolicySchema() { return SpecSchema()["properties"]["runPolicy"]; }

std::set<std::string> Properties(const json& schema) {
  std::set<std::string> out;
  for (const auto& [k, v] : schema["properties"].items()) out.insert(k);
  return out;
}

std::set<std::string> Enum(const json& schema) {
  std::set<std::string> out;
  for (const json& v : schema["enum"]) out.insert(v.get<std::string>());
  return out;
}

TEST(OperatorAgreementTest, AcceptsEveryExample) {
  int jobs = 0;
  for (const fs::path& p : YamlFiles(kRoot / "examples")) {
    const std::string text = Read(p);
    if (text.find("kind: TrainingJob") == std::string::npos) continue;
    absl::StatusOr<TrainingJob> job = LoadTrainingJob(text, p.filename().string());
    EXPECT_TRUE(job.ok()) << job.status();
    ++jobs;
  }
  EXPECT_GE(jobs, 6);
}

TEST(OperatorAgreementTest, AnswersEveryInvalidJobAsItsFileSays) {
  const std::vector<fs::path> files = YamlFiles(kRoot / "tests/packaging/invalid-jobs");
  ASSERT_GE(files.size(), 12u);
  int refused = 0;
  for (const fs::path& p : files) {
    SCOPED_TRACE(p.filename().string());
    const std::string text = Read(p);
    std::string expected;
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      if (absl::ConsumePrefix(&line, "# operator: ")) expected = std::string(line);
    }
    ASSERT_FALSE(expected.empty()) << "no \"# operator:\" line";
    absl::StatusOr<TrainingJob> job = LoadTrainingJob(text, p.filename().string());
    if (expected.rfind("accepts", 0) == 0) {
      // A documented gap: the CRD refuses it, the operator does not (yet).
      EXPECT_TRUE(job.ok()) << "the operator now refuses it (" << job.status()
                            << "): replace the \"# operator: accepts\" line with its message";
      continue;
    }
    ASSERT_FALSE(job.ok()) << "the operator accepts it";
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(job.status().message()), ::testing::HasSubstr(expected));
    ++refused;
  }
  EXPECT_GE(refused, 12);
}

// The operator refuses unknown fields naming the ones it knows; those lists
// must be the CRD's properties at the same place.
std::set<std::string> OperatorKnownFields(const std::string& yaml) {
  absl::StatusOr<TrainingJob> job = ParseTrainingJob(yaml, "probe.yaml");
  if (job.ok()) {
    ADD_FAILURE() << "unknown field accepted:\n" << yaml;
    return {};
  }
  const std::string message(job.status().message());
  const size_t open = message.find("(known: ");
  const size_t close = message.find(')', open);
  if (open == std::string::npos || close == std::string::npos) {
    ADD_FAILURE() << message;
    return {};
  }
  std::set<std::string> out;
  for (absl::string_view k : absl::StrSplit(message.substr(open + 8, close - open - 8), ", ")) {
    out.insert(std::string(k));
  }
  return out;
}

constexpr char kHeader[] =
    "apiVersion: kubetrain.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: probe}\n";

TEST(OperatorAgreementTest, KnownFieldsAreTheCrdProperties) {
  EXPECT_EQ(OperatorKnownFields(absl::StrCat(kHeader, "spec: {zzUnknown: 1}\n")),
            Properties(SpecSchema()));
  EXPECT_EQ(OperatorKnownFields(
                absl::StrCat(kHeader, "spec: {replicaSpecs: {Worker: {zzUnknown: 1}}}\n")),
            Properties(ReplicaSchema()));
  EXPECT_EQ(OperatorKnownFields(absl::StrCat(kHeader, "spec: {runPolicy: {zzUnknown: 1}}\n")),
            Properties(RunPolicySchema()));
  EXPECT_EQ(OperatorKnownFields(
                absl::StrCat(kHeader, "spec: {runPolicy: {schedulingPolicy: {zzUnknown: 1}}}\n")),
            Properties(RunPolicySchema()["properties"]["schedulingPolicy"]));
  EXPECT_EQ(OperatorKnownFields(absl::StrCat(kHeader, "spec: {elasticPolicy: {zzUnknown: 1}}\n")),
            Properties(SpecSchema()["properties"]["elasticPolicy"]));
}

TEST(OperatorAgreementTest, EnumsAndDefaultsAreTheOperators) {
  std::set<std::string> restart;
  for (RestartPolicy p : {RestartPolicy::kAlways, RestartPolicy::kOnFailure, RestartPolicy::kNever,
                          RestartPolicy::kExitCode}) {
    restart.insert(RestartPolicyName(p));
  }
  EXPECT_EQ(Enum(ReplicaSchema()["properties"]["restartPolicy"]), restart);
  std::set<std::string> clean;
  for (CleanPodPolicy p : {CleanPodPolicy::kRunning, CleanPodPolicy::kAll, CleanPodPolicy::kNone}) {
    clean.insert(CleanPodPolicyName(p));
  }
  EXPECT_EQ(Enum(RunPolicySchema()["properties"]["cleanPodPolicy"]), clean);
  EXPECT_EQ(Enum(SpecSchema()["properties"]["successPolicy"]),
            (std::set<std::string>{SuccessPolicyName(SuccessPolicy::kDefault),
                                   SuccessPolicyName(SuccessPolicy::kAllWorkers)}));
  for (const std::string& name : Enum(SpecSchema()["properties"]["successPolicy"])) {
    EXPECT_TRUE(ParseSuccessPolicy(name).has_value()) << name;
  }
  EXPECT_EQ(Enum(SpecSchema()["properties"]["serviceMode"]),
            (std::set<std::string>{ServiceModeName(ServiceMode::kPerReplica),
                                   ServiceModeName(ServiceMode::kPerJob)}));
  for (const std::string& name : Enum(SpecSchema()["properties"]["serviceMode"])) {
    EXPECT_TRUE(ParseServiceMode(name).has_value()) << name;
  }

  // Defaults: what ApplyDefaults sets on a job that sets nothing.
  absl::StatusOr<TrainingJob> job =
      ParseTrainingJob(absl::StrCat(kHeader,
                                    "spec: {replicaSpecs: {Worker: {template: {spec: {containers: "
                                    "[{name: c, image: i}]}}}}}\n"),
                       "defaults.yaml");
  ASSERT_TRUE(job.ok()) << job.status();
  ApplyDefaults(*job);
  const ReplicaSpec& worker = *job->Find(ReplicaType::kWorker);
  EXPECT_EQ(ReplicaSchema()["properties"]["replicas"]["default"], *worker.replicas);
  EXPECT_EQ(ReplicaSchema()["properties"]["restartPolicy"]["default"],
            RestartPolicyName(*worker.restart_policy));
  EXPECT_EQ(RunPolicySchema()["properties"]["cleanPodPolicy"]["default"],
            CleanPodPolicyName(*job->spec.run_policy.clean_pod_policy));
  EXPECT_EQ(SpecSchema()["properties"]["serviceMode"]["default"],
            ServiceModeName(job->spec.service_mode));

  // Replica types: the keys the CRD's CEL rule allows.
  const std::string rule =
      SpecSchema()["properties"]["replicaSpecs"]["x-kubernetes-validations"][0]["rule"];
  for (ReplicaType t : kAllReplicaTypes) {
    EXPECT_THAT(rule, ::testing::HasSubstr(absl::StrCat("'", ReplicaTypeName(t), "'")));
  }
}

}  // namespace
}  // namespace kubetrain::api
