// Allreduce training with real processes under `kubetrain run`:
// examples/fmnist-allreduce.yaml with 2 and 4 workers reaches the
// single-process accuracy within a point and every rank ends with the same
// parameters (checksums compared); a SIGKILLed worker is named by every
// other rank, and with OnFailure the job restarts from worker-0's
// checkpoint and succeeds.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/launcher_output.h"
#include "tests/support/local_replicas.h"
#include "tests/support/running_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_files.h"

namespace kubetrain {
namespace {

using data::testing_util::TempDir;
using ::testing::HasSubstr;
using testing_util::LastStep;
using testing_util::LastValue;
using testing_util::PidOf;
using testing_util::RunningProcess;

constexpr char kData[] = "/usr/share/datasets/fashion-mnist";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The shipped example with its worker count, args, backoff limit and (when
// given) restart policy replaced.
std::string ExampleJob(int workers, const std::string& args, const std::string& extra_policy,
                       const std::string& restart_policy = "") {
  std::string yaml =
      ReadFile(std::string(KUBETRAIN_SOURCE_DIR) + "/examples/fmnist-allreduce.yaml");
  EXPECT_THAT(yaml, HasSubstr("replicas: 2"));
  yaml = std::regex_replace(yaml, std::regex("replicas: 2"), absl::StrCat("replicas: ", workers));
  yaml = std::regex_replace(yaml, std::regex("args: \\[[^\\]]*\\]"), "args: " + args);
  if (!extra_policy.empty()) {
    yaml = std::regex_replace(yaml, std::regex("backoffLimit: [0-9]+"), extra_policy);
  }
  if (!restart_policy.empty()) {
    EXPECT_THAT(yaml, HasSubstr("restartPolicy: ExitCode"));
    yaml = std::regex_replace(yaml, std::regex("restartPolicy: ExitCode"),
                              "restartPolicy: " + restart_policy);
  }
  return yaml;
}

std::string Args(const std::vector<std::string>& a) {
  std::string s = "[\"train\"";
  for (const auto& x : a) absl::StrAppend(&s, ", \"", x, "\"");
  return s + "]";
}

class AllreduceTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(std::string(kData) + "/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "Fashion-MNIST is not installed at " << kData;
    }
  }
  std::unique_ptr<RunningProcess> Run(const std::string& yaml) {
    data::testing_util::WritePlain(dir_.File("job.yaml"), yaml);
    return std::make_unique<RunningProcess>(
        std::vector<std::string>{KUBETRAIN_BIN, "run", "--grace", "5", dir_.File("job.yaml")},
        std::vector<std::string>{});
  }
  TempDir dir_;
};

TEST_F(AllreduceTraining, TwoAndFourWorkersReachTheSingleProcessAccuracyWithIdenticalParameters) {
  // N workers with batch 64/N average to the same 64-sample updates as one
  // process with batch 64.
  testing_util::ProcessResult single = testing_util::RunProcess(
      {KUBETRAIN_BIN, "train", "--epochs", "3", "--batch-size", "64", "--log-every", "0"},
      std::chrono::seconds(600));
  ASSERT_EQ(single.exit_code, 0) << single.err;
  const double single_acc = LastValue(single.out, "final test_accuracy");
  ASSERT_GT(single_acc, 0.8);
  for (int workers : {2, 4}) {
    SCOPED_TRACE(absl::StrCat(workers, " workers"));
    auto run =
        Run(ExampleJob(workers,
                       Args({"--model", "mlp", "--epochs", "3", "--batch-size",
                             std::to_string(64 / workers), "--threads", "1", "--log-every", "500"}),
                       ""));
    ASSERT_EQ(run->Wait(std::chrono::seconds(900)), 0) << run->Output();
    const std::string out = run->Output();
    EXPECT_THAT(out, HasSubstr("job fmnist-allreduce Succeeded"));
    const double acc = LastValue(out, "final test_accuracy");
    EXPECT_NEAR(acc, single_acc, 0.01) << out;
    std::regex crc(
        "\\[fmnist-allreduce-worker-([0-9]+)\\] info final parameters crc32c=([0-9a-f]+)");
    std::set<std::string> checksums;
    int ranks = 0;
    for (auto it = std::sregex_iterator(out.begin(), out.end(), crc); it != std::sregex_iterator();
         ++it) {
      checksums.insert((*it)[2]);
      ++ranks;
    }
    EXPECT_EQ(ranks, workers) << out;
    EXPECT_EQ(checksums.size(), 1u) << "ranks ended with different parameters:\n" << out;
  }
}

// A world of one has nothing to exchange: the job's worker applies the
// update where the gradient is, and ends with the one process's figures to
// the last printed digit. Its replica runs through $KUBETRAIN_EXE (what
// scripts/gpu-run.sh's run.sh sets to start replicas through the packed
// loader); and `kubetrain run` started through the dynamic loader starts its
// replicas as kubetrain, not as the loader.
TEST_F(AllreduceTraining, AWorldOfOneEndsWhereOneProcessDoesAndReplicasRunKubetrainExe) {
  const std::vector<std::string> train = {"--model",   "mlp", "--epochs",      "2",
                                          "--threads", "1",   "--train-limit", "6400",
                                          "--seed",    "7",   "--log-every",   "50"};
  std::vector<std::string> one = {KUBETRAIN_BIN, "train", "--metrics-port", "0"};
  one.insert(one.end(), train.begin(), train.end());
  testing_util::ProcessResult single = testing_util::RunProcess(one, std::chrono::seconds(300));
  ASSERT_EQ(single.exit_code, 0) << single.err;
  std::smatch want;
  ASSERT_TRUE(std::regex_search(single.out, want, std::regex("test_accuracy=\\S+ test_loss=\\S+")));

  const std::string wrapper = dir_.File("kubetrain-exe");
  const std::string marker = dir_.File("started");
  data::testing_util::WritePlain(wrapper, absl::StrCat("#!/bin/sh\necho \"$@\" >> ", marker,
                                                       "\nexec ", KUBETRAIN_BIN, " \"$@\"\n"));
  std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
  data::testing_util::WritePlain(dir_.File("job.yaml"), ExampleJob(1, Args(train), ""));
  RunningProcess run({KUBETRAIN_BIN, "run", "--grace", "5", dir_.File("job.yaml")},
                     {"KUBETRAIN_EXE=" + wrapper});
  ASSERT_EQ(run.Wait(std::chrono::seconds(300)), 0) << run.Output();
  EXPECT_THAT(run.Output(), HasSubstr("allreduce backend ring: one rank: nothing to exchange"));
  EXPECT_THAT(run.Output(), HasSubstr(want.str()));
  EXPECT_THAT(ReadFile(marker), HasSubstr("train --model mlp")) << "the replica ran the wrapper";

  for (const std::string loader : {"/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"}) {
    if (!std::filesystem::exists(loader)) continue;
    RunningProcess through({loader, KUBETRAIN_BIN, "run", "--grace", "5", dir_.File("job.yaml")},
                           {});
    ASSERT_EQ(through.Wait(std::chrono::seconds(300)), 0) << through.Output();
    EXPECT_THAT(through.Output(), HasSubstr(want.str()));
  }
}

TEST_F(AllreduceTraining, PodsOfTwoReplicasTrainByAllreduceInLockstep) {
  // Two worker pods of 2 device replicas each (--cpu-replicas 2: the --gpus
  // path on the CPU): each pod reduces its replicas first, then the pods'
  // one gradient each meets in the ring; every rank ends identical.
  auto run = Run(ExampleJob(
      2,
      Args({"--model", "mlp", "--epochs", "1", "--train-limit", "4000", "--batch-size", "32",
            "--threads", "1", "--log-every", "0", "--device", "cpu", "--cpu-replicas", "2"}),
      ""));
  ASSERT_EQ(run->Wait(std::chrono::seconds(600)), 0) << run->Output();
  const std::string out = run->Output();
  EXPECT_THAT(out, HasSubstr("job fmnist-allreduce Succeeded"));
  EXPECT_THAT(out, HasSubstr("pod replicas=2 devices=cpu,cpu batch=32 split=16+16"));
  std::regex crc("\\[fmnist-allreduce-worker-([0-9]+)\\] info final parameters crc32c=([0-9a-f]+)");
  std::set<std::string> checksums;
  int ranks = 0;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), crc); it != std::sregex_iterator();
       ++it) {
    checksums.insert((*it)[2]);
    ++ranks;
  }
  EXPECT_EQ(ranks, 2) << out;
  EXPECT_EQ(checksums.size(), 1u) << "ranks ended with different parameters:\n" << out;
  EXPECT_GT(LastValue(out, "final test_accuracy"), 0.6) << out;
}

// Final parameters of every rank, by replica index.
std::map<int, std::string> FinalChecksums(const std::string& out) {
  std::regex crc("\\[fmnist-allreduce-worker-([0-9]+)\\] info final parameters crc32c=([0-9a-f]+)");
  std::map<int, std::string> sums;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), crc); it != std::sregex_iterator();
       ++it) {
    sums[std::stoi((*it)[1])] = (*it)[2];
  }
  return sums;
}

TEST_F(AllreduceTraining, LostWorkersAreReplacedInPlaceAndTheSurvivorsNeverRestart) {
  // Three ranks, worker-1 SIGKILLed mid-run, then worker-0 (which hosts the
  // rendezvous). The survivors keep their processes: they re-form the world
  // (generations 2 and 3) with the replacement the launcher starts, which
  // takes their state. No step is lost beyond the aborted one, which is run
  // again: the final parameters are bit for bit those of an undisturbed run.
  const std::string args =
      Args({"--model", "mlp", "--train-limit", "12000", "--epochs", "3", "--batch-size", "16",
            "--threads", "1", "--log-every", "10", "--peer-timeout", "30"});
  std::string undisturbed;
  {
    auto run = Run(ExampleJob(3, args, ""));
    ASSERT_EQ(run->Wait(std::chrono::seconds(600)), 0) << run->Output();
    undisturbed = run->Output();
  }
  const std::map<int, std::string> reference = FinalChecksums(undisturbed);
  ASSERT_EQ(reference.size(), 3u) << undisturbed;

  auto run = Run(ExampleJob(3, args, ""));
  int last = 0;
  for (int victim : {1, 0}) {
    SCOPED_TRACE(absl::StrCat("worker-", victim));
    ASSERT_TRUE(run->WaitForOutput(
        [&](const std::string& o) {
          return LastStep(o, "fmnist-allreduce-worker-2") >= last + 150;
        },
        std::chrono::seconds(300)))
        << run->Output();
    last = LastStep(run->Output(), "fmnist-allreduce-worker-2");
    const pid_t pid = PidOf(run->Output(), absl::StrCat("fmnist-allreduce-worker-", victim));
    ASSERT_GT(pid, 0);
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    ASSERT_TRUE(run->WaitForOutput(
        [&](const std::string& o) {
          return o.find(victim == 1 ? "generation 2 formed" : "generation 3 formed") !=
                 std::string::npos;
        },
        std::chrono::seconds(120)))
        << run->Output();
  }
  ASSERT_EQ(run->Wait(std::chrono::seconds(600)), 0) << run->Output();
  const std::string out = run->Output();
  // Only the victims were started again; nobody exited for a lost peer.
  EXPECT_THAT(out, HasSubstr("started fmnist-allreduce-worker-1 (pid"));
  EXPECT_EQ(out.find("started fmnist-allreduce-worker-2 (pid", out.find("restart 1")),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("exited with code 129"), std::string::npos) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("\\[fmnist-allreduce-worker-2\\].*generation 2 "
                                                "formed.*lost worker-1")))
      << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("\\[fmnist-allreduce-worker-2\\].*generation 3 "
                                                "formed.*lost worker-0 \\(the rendezvous host\\)")))
      << out;
  EXPECT_EQ(FinalChecksums(out), reference) << out;
  EXPECT_THAT(out, HasSubstr("job fmnist-allreduce Succeeded"));
  EXPECT_GT(LastValue(out, "final test_accuracy"), 0.7);
}

TEST_F(AllreduceTraining, WithOnPeerLossExitAKilledWorkerRestartsTheJobFromTheCheckpoint) {
  // --on-peer-loss exit (the behaviour before re-forming; the recovery
  // benchmark's baseline). Four ranks: worker-2 is not a ring neighbour of
  // worker-0, which learns whom it lost from the rendezvous. OnFailure
  // restarts every rank (each exits retryable), and worker-0 restores its
  // newest checkpoint.
  constexpr int kEvery = 40;
  auto run = Run(ExampleJob(4,
                            Args({"--model",
                                  "mlp",
                                  "--train-limit",
                                  "16000",
                                  "--epochs",
                                  "2",
                                  "--batch-size",
                                  "16",
                                  "--threads",
                                  "1",
                                  "--log-every",
                                  "10",
                                  "--stall-warning",
                                  "2",
                                  "--peer-timeout",
                                  "30",
                                  "--on-peer-loss",
                                  "exit",
                                  "--checkpoint-dir",
                                  dir_.File("ckpt"),
                                  "--checkpoint-every-steps",
                                  std::to_string(kEvery)}),
                            "backoffLimit: 12", "OnFailure"));
  ASSERT_TRUE(run->WaitForOutput(
      [](const std::string& o) {
        return LastStep(o, "fmnist-allreduce-worker-0") >= 2 * kEvery + 10;
      },
      std::chrono::seconds(300)))
      << run->Output();
  const pid_t victim = PidOf(run->Output(), "fmnist-allreduce-worker-2");
  ASSERT_GT(victim, 0);
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  ASSERT_EQ(run->Wait(std::chrono::seconds(600)), 0) << run->Output();
  const std::string out = run->Output();
  EXPECT_THAT(out, HasSubstr("fmnist-allreduce-worker-2 killed by signal 9"));
  EXPECT_THAT(out, HasSubstr("restartPolicy OnFailure"));
  for (int r : {0, 1, 3}) {
    EXPECT_TRUE(std::regex_search(
        out, std::regex(absl::StrCat("\\[fmnist-allreduce-worker-", r, "\\].*lost worker-2"))))
        << "worker-" << r << " did not name worker-2:\n"
        << out;
  }
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("restored \\S+ \\(step ([0-9]+)\\)"))) << out;
  EXPECT_GE(std::stoll(m[1]), 2 * kEvery);
  EXPECT_THAT(out, HasSubstr("resuming at step"));
  EXPECT_THAT(out, HasSubstr("job fmnist-allreduce Succeeded"));
  EXPECT_GT(LastValue(out, "final test_accuracy"), 0.7);
}

// Elastic workers (--min-workers 2 --max-workers 4): two workers train, two
// more join mid-run (their TF_CONFIG lists the grown job, as the operator
// writes it for pods it adds), then one leaves on SIGTERM (a scale-down).
// The world re-forms at each change (generations, "world 3/4"), the data
// is resharded for it, and every rank still in the world ends with the same
// parameters and the accuracy bar.
TEST_F(AllreduceTraining, AnElasticWorldGrowsFromTwoToFourAndShrinksToThree) {
  testing_util::LocalReplicas job(KUBETRAIN_BIN, /*num_ps=*/0, /*num_workers=*/4);
  const std::vector<std::string> args = {
      "--model",        "mlp", "--train-limit", "4000", "--epochs",      "100",
      "--batch-size",   "16",  "--threads",     "1",    "--log-every",   "10",
      "--metrics-port", "0",   "--min-workers", "2",    "--max-workers", "4"};
  job.SetVisibleWorkers(2);
  job.Start("worker", 0, args);
  job.Start("worker", 1, args);
  ASSERT_TRUE(job.WaitForOutput(
      "worker", 0,
      [](const std::string& o) { return o.find("progress step=100/") != std::string::npos; },
      std::chrono::seconds(120)))
      << job.Output("worker", 0);
  job.SetVisibleWorkers(3);
  job.Start("worker", 2, args);
  job.SetVisibleWorkers(4);
  job.Start("worker", 3, args);
  ASSERT_TRUE(job.WaitForOutput(
      "worker", 0,
      [](const std::string& o) {
        return std::regex_search(o, std::regex("generation [0-9]+ formed at step [0-9]+: world 4"));
      },
      std::chrono::seconds(120)))
      << job.Output("worker", 0) << "\n== worker-2\n"
      << job.Output("worker", 2) << "\n== worker-3\n"
      << job.Output("worker", 3);
  ASSERT_TRUE(job.WaitForOutput(
      "worker", 3,
      [](const std::string& o) { return o.find("progress step=") != std::string::npos; },
      std::chrono::seconds(60)))
      << job.Output("worker", 3);
  job.Kill("worker", 3, SIGTERM);
  ASSERT_TRUE(job.WaitForOutput(
      "worker", 0,
      [](const std::string& o) {
        return std::regex_search(o, std::regex("formed at step [0-9]+: world 3 .*left worker-3"));
      },
      std::chrono::seconds(120)))
      << job.Output("worker", 0);
  // The leaver is done, not failed.
  EXPECT_EQ(job.Wait("worker", 3, std::chrono::seconds(60)), 0) << job.Output("worker", 3);
  EXPECT_THAT(job.Output("worker", 3), HasSubstr("worker-3 left the elastic world at step"));
  for (int w : {0, 1, 2}) {
    EXPECT_EQ(job.Wait("worker", w, std::chrono::seconds(300)), 0) << job.Output("worker", w);
  }
  std::set<std::string> sums;
  for (int w : {0, 1, 2}) {
    const std::string out = job.Output("worker", w);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(out, m, std::regex("final parameters crc32c=([0-9a-f]+)")))
        << out;
    sums.insert(m[1]);
    EXPECT_THAT(out, HasSubstr("data resharded for a world of"));
  }
  EXPECT_EQ(sums.size(), 1u) << "ranks ended with different parameters:\n"
                             << job.Output("worker", 0) << "\n== worker-1\n"
                             << job.Output("worker", 1) << "\n== worker-2\n"
                             << job.Output("worker", 2);
  EXPECT_GT(LastValue(job.Output("worker", 0), "final test_accuracy"), 0.7)
      << job.Output("worker", 0);
}

// With --on-peer-loss exit, a deleted pod gets SIGTERM: that worker tells
// the others it is leaving and exits 128+15; the others exit 129 (retryable)
// naming it. Rank 0, which hosts the rendezvous, stays until the other rank
// has the reason.
TEST_F(AllreduceTraining, ASigtermedWorkerIsNamedByTheOthers) {
  for (int victim : {1, 0}) {
    SCOPED_TRACE(absl::StrCat("SIGTERM to worker-", victim));
    const int other = 1 - victim;
    testing_util::LocalReplicas job(KUBETRAIN_BIN, /*num_ps=*/0, /*num_workers=*/2);
    job.StartAll({"--train-limit", "2000", "--epochs", "1000", "--threads", "1", "--log-every",
                  "20", "--metrics-port", "0", "--on-peer-loss", "exit"});
    ASSERT_TRUE(job.WaitForOutput(
        "worker", victim,
        [](const std::string& o) { return o.find("progress step=") != std::string::npos; },
        std::chrono::seconds(120)))
        << job.Output("worker", victim);
    job.Kill("worker", victim, SIGTERM);
    EXPECT_EQ(job.Wait("worker", victim, std::chrono::seconds(60)), 128 + SIGTERM)
        << job.Output("worker", victim);
    EXPECT_EQ(job.Wait("worker", other, std::chrono::seconds(60)), 129)
        << job.Output("worker", other);
    EXPECT_THAT(job.Output("worker", other),
                HasSubstr(absl::StrCat("worker-", victim, " stopped by signal 15")));
  }
}

}  // namespace
}  // namespace kubetrain
