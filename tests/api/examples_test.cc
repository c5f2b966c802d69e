// Every TrainingJob under examples/ loads, defaults and validates.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "api/cluster_spec.h"
#include "api/training_job.h"

namespace kubetrain::api {
namespace {

std::string Read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ExamplesTest, EveryTrainingJobIsValid) {
  int jobs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(KUBETRAIN_EXAMPLES_DIR)) {
    const std::string ext = entry.path().extension().string();
    if (ext != ".yaml" && ext != ".yml" && ext != ".json") continue;
    const std::string text = Read(entry.path());
    if (text.find("TrainingJob") == std::string::npos) continue;
    SCOPED_TRACE(entry.path().string());
    absl::StatusOr<TrainingJob> job = LoadTrainingJob(text, entry.path().string());
    EXPECT_TRUE(job.ok()) << job.status();
    ++jobs;
  }
  EXPECT_GE(jobs, 3);
}

TEST(ExamplesTest, FashionMnistParameterServerJobs) {
  for (const auto& [mode, flag] : {std::pair<std::string, std::string>{"sync", "sync"},
                                   {"async", "async"},
                                   {"ssp", "ssp:2"}}) {
    const std::string path = std::string(KUBETRAIN_EXAMPLES_DIR) + "/fmnist-ps-" + mode + ".yaml";
    SCOPED_TRACE(path);
    absl::StatusOr<TrainingJob> job = LoadTrainingJob(Read(path), path);
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->ReplicaCount(ReplicaType::kPS), 1);
    EXPECT_EQ(job->ReplicaCount(ReplicaType::kWorker), 2);
    EXPECT_EQ(job->Find(ReplicaType::kPS)->Restart(), RestartPolicy::kOnFailure);
    EXPECT_EQ(job->Find(ReplicaType::kWorker)->Restart(), RestartPolicy::kExitCode);
    for (ReplicaType t : {ReplicaType::kPS, ReplicaType::kWorker}) {
      absl::StatusOr<Container> c = job->Find(t)->FirstContainer();
      ASSERT_TRUE(c.ok());
      EXPECT_EQ(c->name, "kubetrain");
      EXPECT_EQ(c->image, "kubetrain:0.1.0");  // the chart's runtimeImage (helm.test.mjs)
      EXPECT_TRUE(c->command.empty());
      ASSERT_FALSE(c->args.empty());
      EXPECT_EQ(c->args.front(), "train");
      auto mode_flag = std::find(c->args.begin(), c->args.end(), "--exchange-mode");
      ASSERT_NE(mode_flag, c->args.end());
      ASSERT_NE(mode_flag + 1, c->args.end());
      EXPECT_EQ(*(mode_flag + 1), flag);
      EXPECT_EQ(job->Find(t)->Port(), 2222);
    }
  }
}

}  // namespace
}  // namespace kubetrain::api
