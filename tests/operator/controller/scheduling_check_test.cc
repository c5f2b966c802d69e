// Which replicas waited too long for a node, and the message that names
// them with the scheduler's own words, from pods shaped as a real
// kube-scheduler leaves them: Pending, no spec.nodeName, and
//   {type: PodScheduled, status: "False", reason: Unschedulable,
//    message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}
#include "operator/controller/scheduling_check.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kubetrain::controller {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

const absl::Time kNow = absl::FromUnixSeconds(1795000000);

std::string Ago(int seconds) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", kNow - absl::Seconds(seconds), absl::UTCTimeZone());
}

Json Pending(const std::string& name, int age_seconds, const std::string& scheduler_message) {
  Json pod{{"metadata", {{"name", name}, {"creationTimestamp", Ago(age_seconds)}}},
           {"spec", {{"containers", Json::array()}}},
           {"status", {{"phase", "Pending"}}}};
  if (!scheduler_message.empty()) {
    pod["status"]["conditions"] = Json::array({{{"type", "PodScheduled"},
                                                {"status", "False"},
                                                {"reason", "Unschedulable"},
                                                {"message", scheduler_message}}});
  }
  return pod;
}

Json Running(const std::string& name, int age_seconds) {
  Json pod = Pending(name, age_seconds, "");
  pod["spec"]["nodeName"] = "node-a";
  pod["status"]["phase"] = "Running";
  return pod;
}

constexpr char kGpus[] = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.";

TEST(SchedulingCheck, APodPastTheTimeoutIsNamedWithTheSchedulersMessage) {
  const Json w0 = Running("job-worker-0", 300);
  const Json w1 = Pending("job-worker-1", 130, kGpus);
  SchedulingCheck c = CheckScheduling({{"worker-0", &w0}, {"worker-1", &w1}}, 120, kNow, {});
  ASSERT_TRUE(c.message.has_value());
  EXPECT_EQ(*c.message,
            "1 replica not scheduled within 120 s (runPolicy.schedulingTimeoutSeconds): worker-1 "
            "(pod job-worker-1): 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.");
  EXPECT_THAT(c.pods, ElementsAre("job-worker-1"));
}

TEST(SchedulingCheck, BeforeTheTimeoutItSaysWhenToLookAgain) {
  const Json w1 = Pending("job-worker-1", 100, kGpus);
  const Json w2 = Pending("job-worker-2", 50, "");
  SchedulingCheck c = CheckScheduling({{"worker-1", &w1}, {"worker-2", &w2}}, 120, kNow, {});
  EXPECT_FALSE(c.message.has_value());
  EXPECT_TRUE(c.pods.empty());
  ASSERT_TRUE(c.wait.has_value());
  EXPECT_EQ(*c.wait, absl::Seconds(20));
}

TEST(SchedulingCheck, PodsAreGroupedByMessageAndLongListsCut) {
  std::vector<Json> pods;
  for (int i = 0; i < 7; ++i) pods.push_back(Pending(absl::StrCat("job-worker-", i), 200, kGpus));
  pods.push_back(Pending("job-ps-0", 200, ""));
  std::vector<ReplicaPod> replicas;
  for (int i = 0; i < 7; ++i) replicas.push_back({absl::StrCat("worker-", i), &pods[i]});
  replicas.push_back({"ps-0", &pods[7]});
  SchedulingCheck c = CheckScheduling(replicas, 60, kNow, {});
  ASSERT_TRUE(c.message.has_value());
  EXPECT_THAT(*c.message, HasSubstr("8 replicas not scheduled within 60 s"));
  EXPECT_THAT(*c.message,
              HasSubstr("worker-4 (pod job-worker-4) and 2 more: " + std::string(kGpus) +
                        "; ps-0 (pod job-ps-0): no scheduling "
                        "decision yet"));
  EXPECT_EQ(c.pods.size(), 8u);
}

TEST(SchedulingCheck, AGangIsNamedWholeOnceOnePodIsLate) {
  const Json w0 = Pending("job-worker-0", 130, kGpus);
  const Json w1 = Pending("job-worker-1", 10, kGpus);
  const Json w2 = Running("job-worker-2", 300);
  SchedulingCheck c = CheckScheduling({{"worker-0", &w0}, {"worker-1", &w1}, {"worker-2", &w2}},
                                      120, kNow, Gang{"job", 3});
  ASSERT_TRUE(c.message.has_value());
  EXPECT_THAT(*c.message, HasSubstr("the gang (PodGroup job, minMember 3) waits for all of them"));
  EXPECT_THAT(*c.message, HasSubstr("worker-0 (pod job-worker-0), worker-1 (pod job-worker-1)"));
  EXPECT_THAT(c.pods, ElementsAre("job-worker-0", "job-worker-1"));
}

TEST(SchedulingCheck, ScheduledFinishedAndDeletedPodsDoNotCount) {
  Json bound = Pending("job-worker-0", 500, "");
  bound["spec"]["nodeName"] = "node-b";  // bound, image still pulling
  Json done = Pending("job-worker-1", 500, "");
  done["status"]["phase"] = "Succeeded";
  Json going = Pending("job-worker-2", 500, kGpus);
  going["metadata"]["deletionTimestamp"] = Ago(1);
  SchedulingCheck c = CheckScheduling(
      {{"worker-0", &bound}, {"worker-1", &done}, {"worker-2", &going}}, 60, kNow, {});
  EXPECT_FALSE(c.message.has_value());
  EXPECT_FALSE(c.wait.has_value());
}

}  // namespace
}  // namespace kubetrain::controller
