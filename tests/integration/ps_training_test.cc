// Parameter-server training with real processes on loopback: accuracy
// against single-process training, bit-for-bit equality of 1 and 2 shards,
// async and ssp accuracy and the ssp bound, the PS exiting on its own, and
// elastic workers: one leaving on SIGTERM, one joining a running job.
#include <signal.h>

#include <cmath>
#include <filesystem>
#include <regex>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/exchange/checkpoint.h"
#include "tests/support/local_replicas.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_files.h"

namespace kubetrain {
namespace {

using data::testing_util::TempDir;
using testing_util::LastValue;  // from running_process.h
using testing_util::LocalReplicas;

constexpr char kData[] = "/usr/share/datasets/fashion-mnist";
constexpr auto kJobTimeout = std::chrono::seconds(400);

class PsTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(std::string(kData) + "/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "Fashion-MNIST is not installed at " << kData;
    }
  }

  // Runs 1..n PS and 2 workers to completion; returns worker-0's output.
  std::string RunJob(LocalReplicas& job, const std::vector<std::string>& args, int workers = 2) {
    job.StartAll(args);
    EXPECT_TRUE(job.WaitAll(kJobTimeout)) << "job did not finish";
    for (size_t i = 0; i < job.ps_addresses().size(); ++i) {
      EXPECT_EQ(job.ExitCode("ps", static_cast<int>(i)), 0)
          << job.Output("ps", static_cast<int>(i));
    }
    for (int i = 0; i < workers; ++i) {
      EXPECT_EQ(job.ExitCode("worker", i), 0) << job.Output("worker", i);
    }
    return job.Output("worker", 0);
  }
};

TEST_F(PsTraining, SyncReachesSingleProcessAccuracyWithinOnePoint) {
  // Two workers with batch 32 make the same 64-sample updates as one
  // process with batch 64.
  testing_util::ProcessResult single = testing_util::RunProcess(
      {KUBETRAIN_BIN, "train", "--epochs", "3", "--batch-size", "64", "--log-every", "0"},
      std::chrono::seconds(300));
  ASSERT_EQ(single.exit_code, 0) << single.err;
  const double single_acc = LastValue(single.out, "final test_accuracy");

  LocalReplicas job(KUBETRAIN_BIN, 1, 2);
  const std::string out = RunJob(job, {"--epochs", "3", "--batch-size", "32", "--log-every", "500",
                                       "--threads", "1", "--exchange-mode", "sync"});
  const double ps_acc = LastValue(out, "final test_accuracy");
  std::cout << "single-process " << single_acc << ", 1 PS + 2 workers sync " << ps_acc << "\n";
  EXPECT_GE(ps_acc, single_acc - 0.01);
  EXPECT_GE(ps_acc, 0.85);
  // The PS left on its own, saying so.
  EXPECT_THAT(job.Output("ps", 0), ::testing::HasSubstr("every worker finished"));
  // By default the steps went over the direct TCP data plane.
  EXPECT_THAT(job.Output("worker", 0),
              ::testing::HasSubstr("ps-0: exchanging over the data plane at"));
}

std::vector<float> FinalParams(const std::string& dir, int shards) {
  std::vector<float> all;
  for (int i = 0; i < shards; ++i) {
    absl::StatusOr<exchange::CheckpointData> d = exchange::LoadLatestCheckpoint(
        dir, i, shards, [](const std::string& w) { ADD_FAILURE() << w; });
    EXPECT_TRUE(d.ok()) << d.status();
    if (!d.ok()) return {};
    EXPECT_EQ(static_cast<int64_t>(d->header.range().offset()), static_cast<int64_t>(all.size()));
    all.insert(all.end(), d->params.begin(), d->params.end());
    for (const auto& s : d->states) EXPECT_EQ(s.size(), d->params.size());
  }
  return all;
}

// Two shards, the gRPC plane instead of the data plane, and pipelined sync
// steps each give the parameters one shard on the data plane gives, bit
// for bit.
TEST_F(PsTraining, TwoShardsAndEitherPlaneGiveTheSameParametersBitForBit) {
  TempDir one, two, over_grpc, piped;
  const std::vector<std::string> args = {
      "--train-limit", "4000", "--epochs", "1",     "--batch-size", "50", "--threads",   "1",
      "--optimizer",   "adam", "--lr",     "0.001", "--seed",       "7",  "--log-every", "0"};
  {
    LocalReplicas job(KUBETRAIN_BIN, 1, 2);
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--checkpoint-dir", one.path()});
    RunJob(job, a);
  }
  {
    LocalReplicas job(KUBETRAIN_BIN, 2, 2);
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--checkpoint-dir", two.path()});
    RunJob(job, a);
  }
  {
    LocalReplicas job(KUBETRAIN_BIN, 1, 2);
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--checkpoint-dir", over_grpc.path(), "--ps-data-plane", "grpc"});
    RunJob(job, a);
    EXPECT_THAT(job.Output("worker", 0),
                ::testing::Not(::testing::HasSubstr("exchanging over the data plane")));
  }
  {
    // Pipelined sync steps (Adam's state applied chunk by chunk) on two shards.
    LocalReplicas job(KUBETRAIN_BIN, 2, 2);
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--checkpoint-dir", piped.path(), "--ps-pipeline"});
    RunJob(job, a);
    EXPECT_THAT(job.Output("worker", 0), ::testing::HasSubstr("(pipelined sync steps)"));
    EXPECT_THAT(job.Output("ps", 0), ::testing::HasSubstr("pipelined sync steps: on"));
  }
  std::vector<float> p1 = FinalParams(one.path(), 1), p2 = FinalParams(two.path(), 2),
                     pg = FinalParams(over_grpc.path(), 1), pp = FinalParams(piped.path(), 2);
  ASSERT_EQ(p1.size(), 235146u);
  ASSERT_EQ(p1.size(), p2.size());
  ASSERT_EQ(p1.size(), pg.size());
  ASSERT_EQ(p1.size(), pp.size());
  EXPECT_EQ(0, std::memcmp(p1.data(), p2.data(), p1.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(p1.data(), pg.data(), p1.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(p1.data(), pp.data(), p1.size() * sizeof(float)));
}

TEST_F(PsTraining, APodOfTwoReplicasPushesOncePerStepAndMatchesOneReplica) {
  // A worker pod with 2 device replicas (--cpu-replicas 2: the --gpus path
  // on the CPU) splits each batch of 50 into 25 + 25, averages in the pod,
  // and pushes once a step: the PS applies as many pushes as there are
  // steps, and the parameters follow a 1-replica worker's at batch 50.
  TempDir one, pod;
  const std::vector<std::string> args = {
      "--train-limit", "2000", "--epochs", "1", "--batch-size", "50", "--threads", "1",
      "--device",      "cpu",  "--seed",   "7", "--log-every",  "0"};
  std::string pod_ps;
  {
    LocalReplicas job(KUBETRAIN_BIN, 1, 1);
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--checkpoint-dir", one.path()});
    RunJob(job, a, 1);
  }
  {
    LocalReplicas job(KUBETRAIN_BIN, 1, 1);
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--checkpoint-dir", pod.path(), "--cpu-replicas", "2"});
    const std::string out = RunJob(job, a, 1);
    EXPECT_THAT(out, ::testing::HasSubstr("pod replicas=2 devices=cpu,cpu batch=50 split=25+25"));
    pod_ps = job.Output("ps", 0);
  }
  // 2000 samples / 50 = 40 steps, 40 pushes.
  EXPECT_THAT(pod_ps, ::testing::HasSubstr("stats global_step=40 applied=40 "));
  std::vector<float> p1 = FinalParams(one.path(), 1), p2 = FinalParams(pod.path(), 1);
  ASSERT_EQ(p1.size(), p2.size());
  ASSERT_FALSE(p1.empty());
  double scale = 0, worst = 0;
  for (size_t i = 0; i < p1.size(); ++i) {
    scale = std::max(scale, std::abs(static_cast<double>(p1[i])));
    worst = std::max(worst, std::abs(static_cast<double>(p2[i]) - p1[i]));
  }
  EXPECT_LE(worst, 1e-4 * scale) << "largest difference " << worst << " of " << scale;
}

TEST_F(PsTraining, AsyncReaches086) {
  // Asynchrony adds implicit momentum (stale gradients act like momentum,
  // Mitliagkas et al. 2016), so async jobs use less explicit momentum.
  LocalReplicas job(KUBETRAIN_BIN, 1, 2);
  const std::string out = RunJob(job, {"--epochs", "6", "--threads", "1", "--log-every", "500",
                                       "--exchange-mode", "async", "--momentum", "0.5"});
  std::cout << "async test accuracy " << LastValue(out, "final test_accuracy") << "\n";
  EXPECT_GE(LastValue(out, "final test_accuracy"), 0.86) << out;
}

TEST_F(PsTraining, SspReaches086AndNeverExceedsItsBound) {
  LocalReplicas job(KUBETRAIN_BIN, 1, 2);
  // Momentum 0.5 for the same reason as async.
  const std::string out = RunJob(job, {"--epochs", "6", "--threads", "1", "--log-every", "500",
                                       "--exchange-mode", "ssp:2", "--momentum", "0.5"});
  std::cout << "ssp:2 test accuracy " << LastValue(out, "final test_accuracy") << "\n";
  EXPECT_GE(LastValue(out, "final test_accuracy"), 0.86) << out;
  // The PS records the largest lead it ever let through.
  const double lead = LastValue(job.Output("ps", 0), "max_ssp_lead");
  EXPECT_LE(lead, 2);
  EXPECT_GE(lead, 0);
}

}  // namespace
}  // namespace kubetrain

namespace kubetrain {
namespace {

// Fast fault checks (no real training needed).
TEST(PsFaults, AWorkerWithoutItsPsExitsRetryableNamingIt) {
  LocalReplicas job(KUBETRAIN_BIN, 1, 2);
  job.Start("worker", 1, {"--train-limit", "1000", "--peer-timeout", "2", "--epochs", "1"});
  ASSERT_EQ(job.Wait("worker", 1, std::chrono::seconds(60)), 129) << job.Output("worker", 1);
  EXPECT_THAT(job.Output("worker", 1),
              ::testing::HasSubstr("lost parameter server ps-0 (" + job.ps_addresses()[0]));
}

TEST(PsFaults, APsWhoseWorkerNeverComesExitsRetryableNamingIt) {
  LocalReplicas job(KUBETRAIN_BIN, 1, 2);
  job.Start("ps", 0, {"--peer-timeout", "2"});
  ASSERT_EQ(job.Wait("ps", 0, std::chrono::seconds(60)), 129) << job.Output("ps", 0);
  EXPECT_THAT(job.Output("ps", 0), ::testing::HasSubstr("peer lost: worker-0 (never registered)"));
}

TEST(PsFaults, ASecondPsOnATakenPortFailsLoudlyInsteadOfSharingIt) {
  LocalReplicas job(KUBETRAIN_BIN, 1, 1);
  job.Start("ps", 0, {"--peer-timeout", "60"});
  // Once the first one listens, start an impostor on its port.
  ASSERT_TRUE(job.WaitForOutput(
      "ps", 0, [](const std::string& o) { return o.find("listening on port") != o.npos; },
      std::chrono::seconds(30)))
      << job.Output("ps", 0);
  std::vector<std::string> env = {"TF_CONFIG=" + job.TfConfig("ps", 0)};
  testing_util::RunningProcess impostor({KUBETRAIN_BIN, "train", "--peer-timeout", "60"}, env);
  ASSERT_EQ(impostor.Wait(std::chrono::seconds(30)), 1) << impostor.Output();
  EXPECT_THAT(impostor.Output(), ::testing::HasSubstr("cannot listen on 0.0.0.0:"));
  job.Kill("ps", 0, SIGTERM);
  EXPECT_EQ(job.Wait("ps", 0, std::chrono::seconds(30)), 128 + SIGTERM);
}

TEST(PsFaults, TheJobTokenIsRequiredWhenSet) {
  LocalReplicas job(KUBETRAIN_BIN, 1, 1);
  job.Start("ps", 0, {"--peer-timeout", "30"}, {"KUBETRAIN_JOB_TOKEN=right"});
  job.Start("worker", 0, {"--train-limit", "1000", "--epochs", "1", "--peer-timeout", "30"},
            {"KUBETRAIN_JOB_TOKEN=wrong"});
  ASSERT_EQ(job.Wait("worker", 0, std::chrono::seconds(60)), 1) << job.Output("worker", 0);
  EXPECT_THAT(job.Output("worker", 0), ::testing::HasSubstr("missing or wrong job token"));
  job.Kill("ps", 0, SIGTERM);
  EXPECT_EQ(job.Wait("ps", 0, std::chrono::seconds(30)), 128 + SIGTERM);
  EXPECT_THAT(job.Output("ps", 0), ::testing::HasSubstr("received signal 15"));
}

}  // namespace
}  // namespace kubetrain

namespace kubetrain {
namespace {

// Elastic workers with real processes (issue 29). A worker told to stop
// (SIGTERM, a scale-down) leaves: the PS stops waiting for it, the others
// finish and the PS exits 0 on its own instead of timing the worker out.
TEST_F(PsTraining, AWorkerStoppedBySigtermLeavesAndTheOthersFinish) {
  LocalReplicas job(KUBETRAIN_BIN, 1, 3);
  const std::vector<std::string> args = {"--train-limit", "16000", "--epochs",       "8",
                                         "--batch-size",  "32",    "--threads",      "1",
                                         "--log-every",   "10",    "--peer-timeout", "60"};
  job.StartAll(args);
  ASSERT_TRUE(job.WaitForOutput(
      "worker", 2, [](const std::string& o) { return LastValue(o, "progress step") >= 50; },
      std::chrono::seconds(120)))
      << job.Output("worker", 2);
  job.Kill("worker", 2, SIGTERM);
  EXPECT_EQ(job.Wait("worker", 2, std::chrono::seconds(30)), 128 + SIGTERM)
      << job.Output("worker", 2);
  EXPECT_THAT(job.Output("worker", 2), ::testing::HasSubstr("worker-2 stopped by signal 15"));
  ASSERT_TRUE(job.WaitAll(kJobTimeout)) << job.Output("ps", 0);
  EXPECT_EQ(job.ExitCode("ps", 0), 0) << job.Output("ps", 0);
  EXPECT_EQ(job.ExitCode("worker", 0), 0) << job.Output("worker", 0);
  EXPECT_EQ(job.ExitCode("worker", 1), 0) << job.Output("worker", 1);
  EXPECT_THAT(job.Output("ps", 0),
              ::testing::ContainsRegex("worker-2 left at step [0-9]+: worker-2 stopped by signal "
                                       "15 .*; rounds now count 2 workers"));
}

// A worker the PS's cluster spec did not list joins a running sync job
// (its own TF_CONFIG lists three workers): the PS counts it from a round
// boundary, it starts at the job's step, and everyone finishes.
TEST_F(PsTraining, AWorkerJoiningARunningJobIsCountedAndEveryoneFinishes) {
  LocalReplicas job(KUBETRAIN_BIN, 1, 2);
  const std::vector<std::string> args = {"--train-limit", "16000", "--epochs",       "8",
                                         "--batch-size",  "32",    "--threads",      "1",
                                         "--log-every",   "10",    "--peer-timeout", "60"};
  job.StartAll(args);
  ASSERT_TRUE(job.WaitForOutput(
      "worker", 0, [](const std::string& o) { return LastValue(o, "progress step") >= 50; },
      std::chrono::seconds(120)))
      << job.Output("worker", 0);
  // The newcomer's TF_CONFIG: the same PS, three workers, it the third.
  const std::string tf_config = job.TfConfig("worker", 1);
  const size_t workers_end = tf_config.find("]", tf_config.find("\"worker\":["));
  ASSERT_NE(workers_end, std::string::npos) << tf_config;
  std::string joiner_config =
      tf_config.substr(0, workers_end) + ",\"127.0.0.1:1\"" + tf_config.substr(workers_end);
  const size_t index = joiner_config.find("\"index\":1");
  ASSERT_NE(index, std::string::npos) << joiner_config;
  joiner_config.replace(index, 9, "\"index\":2");
  std::vector<std::string> argv = {KUBETRAIN_BIN, "train"};
  argv.insert(argv.end(), args.begin(), args.end());
  testing_util::RunningProcess joiner(argv, {"TF_CONFIG=" + joiner_config});
  ASSERT_EQ(joiner.Wait(kJobTimeout), 0) << joiner.Output();
  ASSERT_TRUE(job.WaitAll(kJobTimeout)) << job.Output("ps", 0);
  EXPECT_EQ(job.ExitCode("ps", 0), 0) << job.Output("ps", 0);
  EXPECT_EQ(job.ExitCode("worker", 0), 0) << job.Output("worker", 0);
  EXPECT_EQ(job.ExitCode("worker", 1), 0) << job.Output("worker", 1);
  EXPECT_THAT(job.Output("ps", 0),
              ::testing::ContainsRegex("worker-2 joined at step [0-9]+; counted from step "
                                       "[0-9]+ \\(this round counts [23] workers\\)"));
  // It started at the job's step, not at 0: its first progress line is
  // beyond the step it joined at.
  std::smatch first;
  const std::string out = joiner.Output();
  ASSERT_TRUE(std::regex_search(out, first, std::regex("progress step=([0-9]+)"))) << out;
  EXPECT_GT(std::stoll(first[1]), 50) << out;
}

TEST(PsRoles, TheEvaluatorReportsAsTrainingProgressesAndStopsAtTheEnd) {
  if (!std::filesystem::exists(std::string(kData) + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed at " << kData;
  }
  // The evaluator is part of the cluster, as the operator and the launcher
  // declare it, so the PS waits for it: training lasts about a second, less
  // than a loaded machine may take to start the evaluator's process.
  LocalReplicas job(KUBETRAIN_BIN, 1, 2, /*num_evaluators=*/1);
  const std::vector<std::string> args = {
      "--train-limit",        "6000", "--epochs",    "2", "--threads",      "1",
      "--eval-interval-secs", "0.2",  "--log-every", "0", "--peer-timeout", "45"};
  job.StartAll(args);
  job.Start("evaluator", 0, args);
  ASSERT_EQ(job.Wait("evaluator", 0, std::chrono::seconds(300)), 0)
      << job.Output("evaluator", 0) << "\n--- ps-0:\n"
      << job.Output("ps", 0) << "\n--- worker-0:\n"
      << job.Output("worker", 0);
  ASSERT_TRUE(job.WaitAll(std::chrono::seconds(300)));
  const std::string out = job.Output("evaluator", 0);
  EXPECT_THAT(out, ::testing::HasSubstr("info eval step="));
  EXPECT_THAT(out, ::testing::HasSubstr("training finished; evaluator done"));
  // It saw the final parameters: its last evaluation is at the last step.
  EXPECT_EQ(LastValue(out, "eval step"), 94);  // 2 epochs x 47 batches of 64 per worker shard
}

}  // namespace
}  // namespace kubetrain

namespace kubetrain {
namespace {

TEST(PsRoles, AnEvaluatorStartingAfterTheWorkersFinishedStillSeesTheEnd) {
  if (!std::filesystem::exists(std::string(kData) + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed at " << kData;
  }
  LocalReplicas job(KUBETRAIN_BIN, 1, 2, /*num_evaluators=*/1);
  const std::vector<std::string> args = {"--train-limit", "2000", "--epochs",    "1",
                                         "--threads",     "1",    "--log-every", "0"};
  job.StartAll(args);
  ASSERT_EQ(job.Wait("worker", 0, std::chrono::seconds(120)), 0) << job.Output("worker", 0);
  ASSERT_EQ(job.Wait("worker", 1, std::chrono::seconds(120)), 0) << job.Output("worker", 1);
  // The PS knows from TF_CONFIG that an evaluator belongs to the job, so it
  // waits for it rather than leaving as soon as the workers are done.
  job.Start("evaluator", 0, args);
  ASSERT_EQ(job.Wait("evaluator", 0, std::chrono::seconds(60)), 0) << job.Output("evaluator", 0);
  EXPECT_THAT(job.Output("evaluator", 0), ::testing::HasSubstr("training finished"));
  EXPECT_EQ(job.Wait("ps", 0, std::chrono::seconds(30)), 0) << job.Output("ps", 0);
}

}  // namespace
}  // namespace kubetrain
