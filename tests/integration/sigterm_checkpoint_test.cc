// Checkpoint before disruption, with the real binary on loopback: SIGTERM (a
// deleted pod, a suspended job) makes allreduce worker 0 and each PS shard
// write a checkpoint of the last completed step before exiting 128+15, says
// so in the termination message the operator reads
// (api/checkpoint_message.h), and the job started again continues from it
// ("restored ... (step N)"). A rank re-forming after worker 0 left stops on
// its own SIGTERM. Also through `kubetrain run`, whose SIGTERM stops every
// replica.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "api/checkpoint_message.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/local_replicas.h"
#include "tests/support/running_process.h"
#include "tests/support/temp_files.h"

namespace kubetrain {
namespace {

using data::testing_util::TempDir;
using ::testing::HasSubstr;
using testing_util::RunningProcess;

constexpr char kData[] = "/usr/share/datasets/fashion-mnist";
constexpr auto kWait = std::chrono::seconds(120);

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool HasProgress(const std::string& out) { return out.find("progress step=") != std::string::npos; }

// "checkpoint at step N written in X s (SIGTERM): PATH" in `out`: {N, PATH}.
std::optional<api::CheckpointMessage> LoggedCheckpoint(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m,
                         std::regex("checkpoint at step ([0-9]+) written in [0-9.]+ s "
                                    "\\(SIGTERM\\): (\\S+)"))) {
    return std::nullopt;
  }
  return api::CheckpointMessage{std::stoll(m[1]), m[2]};
}

class SigtermCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(std::string(kData) + "/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "Fashion-MNIST is not installed at " << kData;
    }
  }
  // Long enough never to finish: the test stops it.
  std::vector<std::string> Args() const {
    return {"--train-limit",
            "2000",
            "--epochs",
            "1000",
            "--threads",
            "1",
            "--log-every",
            "20",
            "--metrics-port",
            "0",
            "--checkpoint-dir",
            ckpt_,
            "--checkpoint-every-steps",
            "1000000",
            "--checkpoint-every-secs",
            "0"};
  }
  std::string TerminationLog(const std::string& replica) const {
    return dir_.File(replica + ".termination-log");
  }
  TempDir dir_;
  const std::string ckpt_ = dir_.File("ckpt");
};

TEST_F(SigtermCheckpoint, AllreduceWorkerZeroCheckpointsAndTheNextRunRestoresIt) {
  api::CheckpointMessage first;
  {
    testing_util::LocalReplicas job(KUBETRAIN_BIN, /*num_ps=*/0, /*num_workers=*/2);
    for (int w : {0, 1}) {
      job.Start("worker", w, Args(),
                {absl::StrCat("KUBETRAIN_TERMINATION_LOG=", TerminationLog(absl::StrCat("w", w)))});
    }
    ASSERT_TRUE(job.WaitForOutput("worker", 0, HasProgress, kWait)) << job.Output("worker", 0);
    // A suspended job: every pod gets SIGTERM.
    job.Kill("worker", 0, SIGTERM);
    job.Kill("worker", 1, SIGTERM);
    EXPECT_EQ(job.Wait("worker", 0, kWait), 128 + SIGTERM) << job.Output("worker", 0);
    EXPECT_EQ(job.Wait("worker", 1, kWait), 128 + SIGTERM) << job.Output("worker", 1);
    std::optional<api::CheckpointMessage> logged = LoggedCheckpoint(job.Output("worker", 0));
    ASSERT_TRUE(logged) << job.Output("worker", 0);
    EXPECT_GT(logged->step, 0);
    EXPECT_TRUE(std::filesystem::exists(logged->path)) << logged->path;
    // What the operator reads into status.lastCheckpoint.
    EXPECT_EQ(api::ParseCheckpointMessage(ReadFile(TerminationLog("w0"))), logged);
    EXPECT_THAT(ReadFile(TerminationLog("w1")), HasSubstr("rank 0 writes the checkpoint"));
    EXPECT_THAT(job.Output("worker", 1), HasSubstr("this replica writes no checkpoint"));
    first = *logged;
  }
  // The job again (resume): worker 0 restores that checkpoint, both ranks
  // continue at its step.
  testing_util::LocalReplicas job(KUBETRAIN_BIN, /*num_ps=*/0, /*num_workers=*/2);
  job.StartAll(Args());
  const std::string restored = absl::StrCat("restored ", first.path, " (step ", first.step, ")");
  ASSERT_TRUE(job.WaitForOutput(
      "worker", 0, [&](const std::string& o) { return o.find(restored) != std::string::npos; },
      kWait))
      << job.Output("worker", 0);
  for (int w : {0, 1}) {
    ASSERT_TRUE(job.WaitForOutput(
        "worker", w,
        [&](const std::string& o) {
          return o.find(absl::StrCat("resuming at step ", first.step)) != std::string::npos;
        },
        kWait))
        << job.Output("worker", w);
  }
  // Training again (a step logged after the restore): a SIGTERM before the
  // loop begins ends the process at once, with nothing new to save.
  ASSERT_TRUE(job.WaitForOutput(
      "worker", 0,
      [&](const std::string& o) {
        const size_t at = o.find(restored);
        return at != std::string::npos && o.find("progress step=", at) != std::string::npos;
      },
      kWait))
      << job.Output("worker", 0);
  job.Kill("worker", 0, SIGTERM);
  job.Kill("worker", 1, SIGTERM);
  EXPECT_EQ(job.Wait("worker", 0, kWait), 128 + SIGTERM) << job.Output("worker", 0);
  std::optional<api::CheckpointMessage> second = LoggedCheckpoint(job.Output("worker", 0));
  ASSERT_TRUE(second) << job.Output("worker", 0);
  EXPECT_GE(second->step, first.step);
  EXPECT_TRUE(job.WaitAll(kWait));
}

TEST_F(SigtermCheckpoint, APsShardCheckpointsOnSigtermAndReportsIt) {
  testing_util::LocalReplicas job(KUBETRAIN_BIN, /*num_ps=*/1, /*num_workers=*/1);
  job.Start("ps", 0, Args(), {absl::StrCat("KUBETRAIN_TERMINATION_LOG=", TerminationLog("ps0"))});
  job.Start("worker", 0, Args());
  ASSERT_TRUE(job.WaitForOutput("worker", 0, HasProgress, kWait)) << job.Output("worker", 0);
  job.Kill("ps", 0, SIGTERM);
  EXPECT_EQ(job.Wait("ps", 0, kWait), 128 + SIGTERM) << job.Output("ps", 0);
  std::optional<api::CheckpointMessage> logged = LoggedCheckpoint(job.Output("ps", 0));
  ASSERT_TRUE(logged) << job.Output("ps", 0);
  EXPECT_GT(logged->step, 0);
  EXPECT_TRUE(std::filesystem::exists(logged->path)) << logged->path;
  EXPECT_EQ(api::ParseCheckpointMessage(ReadFile(TerminationLog("ps0"))), logged);
  job.Kill("worker", 0, SIGKILL);
  EXPECT_TRUE(job.WaitAll(kWait));
}

// A suspend whose SIGTERMs arrive apart (CI saw 0.3 s): worker 0, the
// rendezvous host, stops first and goes; worker 1, still training, re-forms
// the world and waits for worker 0's replacement. Its own SIGTERM ends that
// wait: it exits 128+15 at once, not after --rendezvous-timeout (here longer
// than the test waits), and says rank 0 writes the checkpoint.
TEST_F(SigtermCheckpoint, ARankReformingAfterWorkerZeroLeftStopsOnItsOwnSigterm) {
  testing_util::LocalReplicas job(KUBETRAIN_BIN, /*num_ps=*/0, /*num_workers=*/2);
  std::vector<std::string> args = Args();
  for (const char* a : {"--on-peer-loss", "reform", "--rendezvous-timeout", "600"}) {
    args.push_back(a);
  }
  for (int w : {0, 1}) {
    job.Start("worker", w, args,
              {absl::StrCat("KUBETRAIN_TERMINATION_LOG=", TerminationLog(absl::StrCat("w", w)))});
  }
  ASSERT_TRUE(job.WaitForOutput("worker", 0, HasProgress, kWait)) << job.Output("worker", 0);
  job.Kill("worker", 0, SIGTERM);
  EXPECT_EQ(job.Wait("worker", 0, kWait), 128 + SIGTERM) << job.Output("worker", 0);
  ASSERT_TRUE(job.WaitForOutput(
      "worker", 1,
      [](const std::string& o) { return o.find("re-forming the world") != std::string::npos; },
      kWait))
      << job.Output("worker", 1);
  job.Kill("worker", 1, SIGTERM);
  EXPECT_EQ(job.Wait("worker", 1, kWait), 128 + SIGTERM) << job.Output("worker", 1);
  EXPECT_THAT(ReadFile(TerminationLog("w1")), HasSubstr("rank 0 writes the checkpoint"));
}

// `kubetrain run`: SIGTERM to the launcher stops every replica (the job
// fails Interrupted, 128+15) after worker 0's checkpoint; the same job run
// again restores it.
TEST_F(SigtermCheckpoint, ALocalJobStoppedBySigtermResumesWhereItStopped) {
  std::string args = "[\"train\"";
  for (const std::string& a : Args()) absl::StrAppend(&args, ", \"", a, "\"");
  args += "]";
  const std::string yaml = absl::StrCat(R"(apiVersion: kubetrain.io/v1alpha1
kind: TrainingJob
metadata: {name: stop}
spec:
  replicaSpecs:
    Worker:
      replicas: 2
      restartPolicy: ExitCode
      template:
        spec:
          containers:
            - name: kubetrain
              image: kubetrain:0.1.0
              args: )",
                                        args, "\n");
  data::testing_util::WritePlain(dir_.File("job.yaml"), yaml);
  const std::vector<std::string> argv = {KUBETRAIN_BIN, "run", "--grace", "30",
                                         dir_.File("job.yaml")};
  api::CheckpointMessage first;
  {
    RunningProcess run(argv, {});
    ASSERT_TRUE(run.WaitForOutput(HasProgress, kWait)) << run.Output();
    run.Signal(SIGTERM);
    EXPECT_EQ(run.Wait(kWait), 128 + SIGTERM) << run.Output();
    const std::string out = run.Output();
    std::optional<api::CheckpointMessage> logged = LoggedCheckpoint(out);
    ASSERT_TRUE(logged) << out;
    EXPECT_THAT(out, HasSubstr("stop-worker-0 exited with code 143"));
    EXPECT_THAT(out, HasSubstr("job stop Failed: Interrupted"));
    first = *logged;
  }
  RunningProcess run(argv, {});
  const std::string restored = absl::StrCat("restored ", first.path, " (step ", first.step, ")");
  ASSERT_TRUE(run.WaitForOutput(
      [&](const std::string& o) { return o.find(restored) != std::string::npos; }, kWait))
      << run.Output();
  run.Signal(SIGINT);  // Ctrl-C: the same stop
  EXPECT_EQ(run.Wait(kWait), 128 + SIGINT) << run.Output();
}

}  // namespace
}  // namespace kubetrain
