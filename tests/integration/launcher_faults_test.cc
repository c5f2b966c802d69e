// Faults under `kubetrain run`, with the real trainer: a worker killed with
// SIGKILL is restarted and the job succeeds; a PS killed with SIGKILL
// restarts from its checkpoint, the workers reconnect without exiting (the
// same processes finish the job), the job succeeds and at most one
// checkpoint interval of steps is repeated; a PS without checkpoints killed
// the same way comes back empty and the workers re-initialise it from the
// parameters they hold.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/launcher_output.h"
#include "tests/support/running_process.h"
#include "tests/support/temp_files.h"

namespace kubetrain {
namespace {

using data::testing_util::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::LastStep;
using testing_util::PidOf;
using testing_util::RunningProcess;

constexpr char kData[] = "/usr/share/datasets/fashion-mnist";
constexpr int kCheckpointEvery = 40;

// `ckpt_dir` empty: no checkpoints.
std::string JobYaml(const std::string& ckpt_dir) {
  const std::string args =
      "[\"train\", \"--train-limit\", \"16000\", \"--epochs\", \"3\", \"--batch-size\", \"32\", "
      "\"--threads\", \"1\", \"--log-every\", \"10\", \"--peer-timeout\", \"60\"" +
      (ckpt_dir.empty()
           ? std::string()
           : ", \"--checkpoint-dir\", \"" + ckpt_dir + "\", \"--checkpoint-every-steps\", \"" +
                 std::to_string(kCheckpointEvery) + "\"") +
      "]";
  return R"(apiVersion: kubetrain.io/v1alpha1
kind: TrainingJob
metadata: {name: faults}
spec:
  replicaSpecs:
    PS:
      replicas: 1
      restartPolicy: OnFailure
      template: {spec: {containers: [{name: kubetrain, image: kubetrain, args: )" +
         args + R"(}]}}
    Worker:
      replicas: 2
      restartPolicy: ExitCode
      template: {spec: {containers: [{name: kubetrain, image: kubetrain, args: )" +
         args + R"(}]}}
  runPolicy: {backoffLimit: 3}
)";
}

class LauncherFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(std::string(kData) + "/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "Fashion-MNIST is not installed at " << kData;
    }
    data::testing_util::WritePlain(dir_.File("job.yaml"), JobYaml(dir_.File("ckpt")));
  }
  std::unique_ptr<RunningProcess> Run(const std::string& job = "job.yaml") {
    return std::make_unique<RunningProcess>(
        std::vector<std::string>{KUBETRAIN_BIN, "run", "--grace", "5", dir_.File(job)},
        std::vector<std::string>{});
  }
  // Both workers were started once and never again: they kept their
  // processes through whatever happened to the PS.
  static void ExpectWorkersNeverRestarted(const std::string& out,
                                          const std::vector<pid_t>& before) {
    for (int i = 0; i < 2; ++i) {
      const std::string name = "faults-worker-" + std::to_string(i);
      EXPECT_EQ(PidOf(out, name), before[static_cast<size_t>(i)]) << name << " was restarted";
      EXPECT_THAT(out, Not(HasSubstr("started " + name + " (pid " +
                                     std::to_string(PidOf(out, name)) + ", restart")));
    }
  }
  TempDir dir_;
};

TEST_F(LauncherFaults, AKilledWorkerIsRestartedAndTheJobSucceeds) {
  auto run = Run();
  ASSERT_TRUE(
      run->WaitForOutput([](const std::string& o) { return LastStep(o, "faults-worker-1") >= 100; },
                         std::chrono::seconds(120)))
      << run->Output();
  const pid_t victim = PidOf(run->Output(), "faults-worker-1");
  ASSERT_GT(victim, 0);
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  ASSERT_EQ(run->Wait(std::chrono::seconds(400)), 0) << run->Output();
  const std::string out = run->Output();
  EXPECT_THAT(out, HasSubstr("faults-worker-1 killed by signal 9"));
  EXPECT_GT(PidOf(out, "faults-worker-1"), 0);
  EXPECT_NE(PidOf(out, "faults-worker-1"), victim) << "worker-1 was started again";
  EXPECT_THAT(out, HasSubstr("started faults-worker-1 (pid"));
  EXPECT_THAT(out, HasSubstr(", restart 1)"));
  EXPECT_THAT(out, HasSubstr("job faults Succeeded"));
  EXPECT_THAT(out, HasSubstr("final test_accuracy="));
}

TEST_F(LauncherFaults, AKilledPsResumesFromItsCheckpointAndTheJobSucceeds) {
  auto run = Run();
  ASSERT_TRUE(run->WaitForOutput(
      [](const std::string& o) {
        return LastStep(o, "faults-worker-0") >= 3 * kCheckpointEvery + kCheckpointEvery / 2;
      },
      std::chrono::seconds(120)))
      << run->Output();
  const pid_t victim = PidOf(run->Output(), "faults-ps-0");
  ASSERT_GT(victim, 0);
  const std::vector<pid_t> workers = {PidOf(run->Output(), "faults-worker-0"),
                                      PidOf(run->Output(), "faults-worker-1")};
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  // Every step a worker reported before the kill was applied by then.
  const int64_t reached = LastStep(run->Output(), "faults-worker-0");
  ASSERT_EQ(run->Wait(std::chrono::seconds(400)), 0) << run->Output();
  const std::string out = run->Output();
  EXPECT_THAT(out, HasSubstr("faults-ps-0 killed by signal 9"));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("restored \\S+ at global step ([0-9]+)")))
      << out;
  const int64_t restored = std::stoll(m[1]);
  EXPECT_GE(restored, kCheckpointEvery);
  EXPECT_GE(restored, reached - kCheckpointEvery) << "lost more than one checkpoint interval";
  // Each worker says where it was and where it continues: the steps it
  // repeats are at most one checkpoint interval.
  std::regex cont("\\[(faults-worker-[01])\\] info continuing at step ([0-9]+) \\(was ([0-9]+)\\)");
  int workers_moved = 0;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), cont); it != std::sregex_iterator();
       ++it) {
    const int64_t at = std::stoll((*it)[2]), was = std::stoll((*it)[3]);
    EXPECT_EQ(at, restored) << (*it)[0];
    EXPECT_LE(was - at, kCheckpointEvery + 1) << (*it)[0];
    ++workers_moved;
  }
  // A worker moves back unless the kill fell right after a checkpoint.
  EXPECT_LE(workers_moved, 2) << out;
  EXPECT_THAT(out, HasSubstr("job faults Succeeded"));
  // The workers waited for the PS instead of exiting, and say where its
  // state came from.
  ExpectWorkersNeverRestarted(out, workers);
  EXPECT_THAT(out, HasSubstr("ps-0 restarted: resumed from its checkpoint at step " +
                             std::to_string(restored)));
}

// Without checkpoints the restarted PS comes back empty: the first worker to
// register re-initialises it from the parameters it last pulled, both go on
// from that step in the same processes, and the job succeeds.
TEST_F(LauncherFaults, AKilledPsWithoutCheckpointsIsReinitialisedByTheWorkers) {
  data::testing_util::WritePlain(dir_.File("job-no-ckpt.yaml"), JobYaml(""));
  auto run = Run("job-no-ckpt.yaml");
  ASSERT_TRUE(
      run->WaitForOutput([](const std::string& o) { return LastStep(o, "faults-worker-0") >= 100; },
                         std::chrono::seconds(120)))
      << run->Output();
  const pid_t victim = PidOf(run->Output(), "faults-ps-0");
  ASSERT_GT(victim, 0);
  const std::vector<pid_t> workers = {PidOf(run->Output(), "faults-worker-0"),
                                      PidOf(run->Output(), "faults-worker-1")};
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  ASSERT_EQ(run->Wait(std::chrono::seconds(400)), 0) << run->Output();
  const std::string out = run->Output();
  EXPECT_THAT(out, HasSubstr("faults-ps-0 killed by signal 9"));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      out, m,
      std::regex("ps-0 restarted: re-initialised from (worker-[01])'s parameters at step "
                 "([0-9]+)")))
      << out;
  // Killed after worker-0 logged step 100. In sync mode step 100 needed both
  // workers' pushes, so each had pulled the parameters of step 99 at least:
  // the re-initialising worker may be worker-1, one pull behind.
  EXPECT_GE(std::stoll(m[2]), 99);
  EXPECT_THAT(out, HasSubstr("initialised by " + std::string(m[1])));
  ExpectWorkersNeverRestarted(out, workers);
  EXPECT_THAT(out, HasSubstr("job faults Succeeded"));
  EXPECT_THAT(out, HasSubstr("final test_accuracy="));
}

}  // namespace
}  // namespace kubetrain
