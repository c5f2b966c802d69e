// The checkpoints stopped replicas reported, as pod events showed them.
#include "operator/controller/stopped_checkpoints.h"

#include <gtest/gtest.h>

#include "tests/operator/controller/planner_test_objects.h"

namespace kubetrain::controller {
namespace {

using namespace testing_objects;  // NOLINT(build/namespaces)

Json Ended(const std::string& type, int index, const std::string& message) {
  Json pod = *Pod(type, index, {.phase = "Failed"});
  pod["status"]["containerStatuses"] = Json::array(
      {{{"name", "c"}, {"state", {{"terminated", {{"exitCode", 143}, {"message", message}}}}}}});
  return pod;
}

TEST(StoppedCheckpointsTest, KeepsTheNewestStepOfEachReplicaUntilTheJobIsForgotten) {
  StoppedCheckpoints seen;
  seen.Observe("ns/j", Ended("worker", 0, "kubetrain: checkpoint step=10 path=/a"));
  seen.Observe("ns/j", Ended("worker", 0, "kubetrain: checkpoint step=8 path=/older"));
  seen.Observe("ns/j", Ended("ps", 1, "kubetrain: checkpoint step=9 path=/b"));
  seen.Observe("ns/j", Ended("worker", 1, "kubetrain: error: worker-1: lost worker-0"));
  seen.Observe("ns/j", *Pod("worker", 2));
  seen.Observe("ns/other", Ended("worker", 0, "kubetrain: checkpoint step=3 path=/c"));
  const std::map<std::string, api::CheckpointMessage> j = seen.Get("ns/j");
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j.at("worker-0"), (api::CheckpointMessage{10, "/a"}));
  EXPECT_EQ(j.at("ps-1"), (api::CheckpointMessage{9, "/b"}));
  seen.Forget("ns/j");
  EXPECT_TRUE(seen.Get("ns/j").empty());
  EXPECT_EQ(seen.Get("ns/other").size(), 1u);
}

}  // namespace
}  // namespace kubetrain::controller
