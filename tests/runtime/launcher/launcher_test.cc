// Drives RunJob with jobs whose containers are /bin/sh scripts. Scripts
// coordinate through files in a temporary directory ($D) and never sleep for
// luck: they wait for files, and the test waits for conditions with deadlines.
#include "runtime/launcher/launcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "api/cluster_spec.h"
#include "tests/support/temp_files.h"

namespace kubetrain::launcher {
namespace {

using data::testing_util::ReadPlain;
using data::testing_util::TempDir;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

struct ReplicaDef {
  ReplicaDef(std::string type_in, int replicas_in, std::string policy_in, std::string script_in)
      : type(std::move(type_in)),
        replicas(replicas_in),
        restart_policy(std::move(policy_in)),
        script(std::move(script_in)) {}

  std::string type;
  int replicas = 1;
  std::string restart_policy = "Never";
  std::string script;
  json extra_env = json::array();
  std::vector<std::string> extra_args;  // after the script: $0, $1, ...
};

class LauncherTest : public ::testing::Test {
 protected:
  // Writes a job (JSON, which the loader reads like YAML) and returns its path.
  std::string WriteJob(const std::vector<ReplicaDef>& defs, json run_policy = json::object(),
                       const std::string& success_policy = "", const std::string& name = "job") {
    json specs = json::object();
    for (const ReplicaDef& d : defs) {
      json env = json::array({{{"name", "D"}, {"value", dir_.path()}}});
      for (const json& e : d.extra_env) env.push_back(e);
      json args = json::array({d.script});
      for (const std::string& a : d.extra_args) args.push_back(a);
      specs[d.type] = {{"replicas", d.replicas},
                       {"restartPolicy", d.restart_policy},
                       {"template",
                        {{"spec",
                          {{"containers", json::array({{{"name", "kubetrain"},
                                                        {"image", "busybox"},
                                                        {"command", json::array({"/bin/sh", "-c"})},
                                                        {"args", args},
                                                        {"env", env}}})}}}}}};
    }
    if (!run_policy.contains("activeDeadlineSeconds")) {
      run_policy["activeDeadlineSeconds"] = 60;  // a hung test fails instead of hanging
    }
    json job = {
        {"apiVersion", "kubetrain.io/v1alpha1"},
        {"kind", "TrainingJob"},
        {"metadata", {{"name", name}}},
        {"spec",
         {{"replicaSpecs", specs}, {"runPolicy", run_policy}, {"successPolicy", success_policy}}}};
    const std::string path = dir_.File("job.json");
    std::ofstream(path) << job.dump(2);
    return path;
  }

  LaunchOptions Options(const std::string& job_file) {
    LaunchOptions o;
    o.job_file = job_file;
    o.self_exe = "/bin/false";
    o.grace = std::chrono::milliseconds(300);
    o.restart_backoff = std::chrono::milliseconds(10);
    o.max_restart_backoff = std::chrono::milliseconds(40);
    return o;
  }

  struct Result {
    int code = -1;
    std::string out;
    std::string err;
    double seconds = 0;
  };

  Result Run(const LaunchOptions& o) {
    std::ostringstream out, err;
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<int> code = RunJob(o, out, err);
    Result r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_TRUE(code.ok()) << code.status();
    r.code = code.ok() ? *code : -1;
    r.out = out.str();
    r.err = err.str();
    return r;
  }

  int Lines(const std::string& file) {
    std::ifstream in(dir_.File(file));
    int n = 0;
    std::string line;
    while (std::getline(in, line)) ++n;
    return n;
  }

  std::map<std::string, std::string> EnvFile(const std::string& file) {
    std::map<std::string, std::string> env;
    std::ifstream in(dir_.File(file));
    std::string line;
    while (std::getline(in, line)) {
      const size_t eq = line.find('=');
      if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return env;
  }

  TempDir dir_;
};

// A script fragment: blocks until $D/<file> exists and is non-empty.
std::string WaitFor(const std::string& file) {
  return "while [ ! -s \"$D/" + file + "\" ]; do sleep 0.01; done; ";
}

// A script fragment: waits for the pid in $D/<file>, then until that process
// has exited and been reaped by the launcher.
std::string WaitUntilGone(const std::string& file) {
  return WaitFor(file) + "while kill -0 `cat \"$D/" + file +
         "\"` 2>/dev/null; do sleep 0.01; done; ";
}

// Counts runs of this replica in $D/runs.<type>-<index>.
constexpr char kCountRun[] =
    "echo run >> \"$D/runs.$KUBETRAIN_REPLICA_TYPE-$KUBETRAIN_REPLICA_INDEX\"; "
    "n=`wc -l < \"$D/runs.$KUBETRAIN_REPLICA_TYPE-$KUBETRAIN_REPLICA_INDEX\"`; ";

// Writes env atomically to $D/env.<type>-<index>.
constexpr char kDumpEnv[] =
    "env > \"$D/tmp.$KUBETRAIN_REPLICA_TYPE-$KUBETRAIN_REPLICA_INDEX\" && "
    "mv \"$D/tmp.$KUBETRAIN_REPLICA_TYPE-$KUBETRAIN_REPLICA_INDEX\" "
    "\"$D/env.$KUBETRAIN_REPLICA_TYPE-$KUBETRAIN_REPLICA_INDEX\"; ";

TEST_F(LauncherTest, EveryReplicaGetsThePodEnvironment) {
  setenv("LAUNCHER_TEST_INHERITED", "from-parent", 1);
  setenv("TF_CONFIG", "bogus", 1);
  setenv("RANK", "99", 1);
  ReplicaDef ps{"PS", 1, "OnFailure", std::string(kDumpEnv) + "exit 0"};
  ReplicaDef worker{"Worker", 2, "ExitCode",
                    std::string(kDumpEnv) + "if [ \"$KUBETRAIN_REPLICA_INDEX\" = 0 ]; then " +
                        WaitFor("env.ps-0") + WaitFor("env.worker-1") + "fi; exit 0"};
  worker.extra_env = json::array(
      {{{"name", "MY_PS"}, {"value", "--ps_hosts=$(KUBETRAIN_PS_HOSTS)"}},
       {{"name", "SELF"}, {"value", "$(KUBETRAIN_REPLICA_TYPE)-$(KUBETRAIN_REPLICA_INDEX)"}},
       {{"name", "SELF_AGAIN"}, {"value", "$(SELF)!"}},
       {{"name", "SECRET"}, {"valueFrom", {{"secretKeyRef", {{"name", "s"}, {"key", "k"}}}}}}});
  const Result r = Run(Options(WriteJob({ps, worker}, json::object(), "", "fmnist")));
  unsetenv("LAUNCHER_TEST_INHERITED");
  unsetenv("TF_CONFIG");
  unsetenv("RANK");
  ASSERT_EQ(r.code, 0) << r.out << r.err;

  std::map<std::string, std::map<std::string, std::string>> envs;
  for (const char* who : {"ps-0", "worker-0", "worker-1"}) {
    envs[who] = EnvFile(std::string("env.") + who);
    ASSERT_FALSE(envs[who].empty()) << who;
  }
  absl::StatusOr<api::TfConfig> tf = api::ParseTfConfig(envs["worker-1"]["TF_CONFIG"]);
  ASSERT_TRUE(tf.ok()) << tf.status();
  const api::ClusterSpec& cluster = tf->cluster;
  ASSERT_EQ(cluster.hosts.size(), 2u);
  ASSERT_EQ(cluster.hosts.at("ps").size(), 1u);
  ASSERT_EQ(cluster.hosts.at("worker").size(), 2u);
  std::set<std::string> ports;
  for (const auto& [type, hosts] : cluster.hosts) {
    for (const std::string& h : hosts) {
      ASSERT_EQ(h.rfind("127.0.0.1:", 0), 0u) << h;
      ports.insert(h.substr(10));
    }
  }
  EXPECT_EQ(ports.size(), 3u);  // distinct per replica

  const std::string token = envs["ps-0"]["KUBETRAIN_JOB_TOKEN"];
  EXPECT_TRUE(std::regex_match(token, std::regex("[0-9a-f]{32}"))) << token;
  std::set<std::string> metrics_ports;
  for (const auto& [who, env] : envs) {
    SCOPED_TRACE(who);
    const std::string type = who.substr(0, who.find('-'));
    const int index = who.back() - '0';
    EXPECT_EQ(env.at("TF_CONFIG"), api::TfConfigJson(cluster, type, index));
    EXPECT_EQ(env.at("KUBETRAIN_PS_HOSTS"), cluster.hosts.at("ps")[0]);
    EXPECT_EQ(env.at("KUBETRAIN_WORKER_HOSTS"), absl::StrJoin(cluster.hosts.at("worker"), ","));
    EXPECT_EQ(env.count("KUBETRAIN_CHIEF_HOSTS"), 0u);
    EXPECT_EQ(env.at("KUBETRAIN_JOB_NAME"), "fmnist");
    EXPECT_EQ(env.at("KUBETRAIN_NAMESPACE"), "default");
    EXPECT_EQ(env.at("KUBETRAIN_REPLICA_TYPE"), type);
    EXPECT_EQ(env.at("KUBETRAIN_REPLICA_INDEX"), std::to_string(index));
    EXPECT_EQ(env.at("KUBETRAIN_JOB_TOKEN"), token);  // one token per job
    EXPECT_EQ(env.count("MASTER_ADDR"), 0u);          // PS jobs have no PyTorch variables
    EXPECT_EQ(env.count("RANK"), 0u);                 // the parent's RANK is not inherited
    EXPECT_EQ(env.at("LAUNCHER_TEST_INHERITED"), "from-parent");
    EXPECT_EQ(env.at("D"), dir_.path());
    const std::string metrics = env.at("KUBETRAIN_METRICS_PORT");
    EXPECT_EQ(ports.count(metrics), 0u);
    metrics_ports.insert(metrics);
  }
  EXPECT_EQ(metrics_ports.size(), 3u);
  EXPECT_EQ(envs["worker-1"]["MY_PS"], "--ps_hosts=" + cluster.hosts.at("ps")[0]);
  EXPECT_EQ(envs["worker-1"]["SELF"], "worker-1");
  EXPECT_EQ(envs["worker-1"]["SELF_AGAIN"], "worker-1!");
  EXPECT_EQ(envs["worker-1"].count("SECRET"), 0u);
  EXPECT_THAT(r.out, HasSubstr("SECRET uses valueFrom"));
}

TEST_F(LauncherTest, WorkerOnlyJobsGetPyTorchVariables) {
  ReplicaDef worker{"Worker", 2, "Never",
                    std::string(kDumpEnv) + "if [ \"$KUBETRAIN_REPLICA_INDEX\" = 0 ]; then " +
                        WaitFor("env.worker-1") + "fi; exit 0"};
  const Result r = Run(Options(WriteJob({worker})));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  for (int i = 0; i < 2; ++i) {
    auto env = EnvFile("env.worker-" + std::to_string(i));
    absl::StatusOr<api::TfConfig> tf = api::ParseTfConfig(env["TF_CONFIG"]);
    ASSERT_TRUE(tf.ok()) << tf.status();
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ("127.0.0.1:" + env["MASTER_PORT"], tf->cluster.hosts.at("worker")[0]);
    EXPECT_EQ(env["WORLD_SIZE"], "2");
    EXPECT_EQ(env["RANK"], std::to_string(i));
    EXPECT_EQ(env.count("KUBETRAIN_PS_HOSTS"), 0u);
  }
}

TEST_F(LauncherTest, ExpandsVariablesInCommandAndArgs) {
  ReplicaDef worker{"Worker", 1, "Never", "printf '%s\\n' \"$0\" \"$@\" > \"$D/args\""};
  worker.extra_args = {"$(KUBETRAIN_REPLICA_TYPE)-$(KUBETRAIN_REPLICA_INDEX)",
                       "$$(KUBETRAIN_JOB_NAME)", "$(NOT_DEFINED)", "--job=$(KUBETRAIN_JOB_NAME)",
                       "$(MY_VAR)"};
  worker.extra_env = json::array({{{"name", "MY_VAR"}, {"value", "mine"}}});
  const Result r = Run(Options(WriteJob({worker})));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(ReadPlain(dir_.File("args")),
            "worker-0\n$(KUBETRAIN_JOB_NAME)\n$(NOT_DEFINED)\n--job=job\nmine\n");
}

TEST_F(LauncherTest, PrefixesEveryOutputLine) {
  ReplicaDef worker{"Worker", 2, "Never",
                    "i=0; while [ $i -lt 200 ]; do "
                    "echo \"line-$KUBETRAIN_REPLICA_INDEX-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"; i=$((i+1)); done; "
                    "echo oops >&2; printf 'no newline'; "
                    "if [ \"$KUBETRAIN_REPLICA_INDEX\" = 0 ]; then " +
                        WaitFor("w1") + "else echo done > \"$D/w1\"; fi"};
  const Result r = Run(Options(WriteJob({worker})));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  std::istringstream lines(r.out);
  std::string line;
  int worker_lines[2] = {0, 0};
  const std::regex launcher_line(R"(\[kubetrain run\] .*)");
  const std::regex worker_line(R"(\[job-worker-([01])\] line-([01])-x{74})");
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_match(line, m, worker_line)) {
      EXPECT_EQ(m[1], m[2]) << line;
      ++worker_lines[m[1].str()[0] - '0'];
      continue;
    }
    if (line == "[job-worker-0] no newline" || line == "[job-worker-1] no newline") continue;
    EXPECT_TRUE(std::regex_match(line, launcher_line)) << "unexpected line: " << line;
  }
  EXPECT_EQ(worker_lines[0], 200);
  EXPECT_EQ(worker_lines[1], 200);
  EXPECT_THAT(r.err, HasSubstr("[job-worker-0] oops\n"));
  EXPECT_THAT(r.err, HasSubstr("[job-worker-1] oops\n"));
  EXPECT_THAT(r.out, HasSubstr("[kubetrain run] started job-worker-0 (pid "));
  EXPECT_THAT(r.out, HasSubstr("[kubetrain run] job-worker-0 exited with code 0"));
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex(R"(\[kubetrain run\] job job Succeeded in [0-9]+\.[0-9]s\n$)")))
      << r.out;
}

TEST_F(LauncherTest, OnFailureRestartsUntilSuccess) {
  ReplicaDef worker{"Worker", 1, "OnFailure",
                    std::string(kCountRun) + "if [ $n -lt 3 ]; then exit 1; fi; exit 0"};
  const Result r = Run(Options(WriteJob({worker})));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(Lines("runs.worker-0"), 3);
  EXPECT_THAT(r.out, HasSubstr("job-worker-0 exited with code 1; restarting in 0.0s (restart 1, "
                               "restartPolicy OnFailure)"));
  EXPECT_THAT(r.out, HasSubstr("(restart 2, restartPolicy OnFailure)"));
  EXPECT_THAT(r.out, HasSubstr("started job-worker-0 (pid "));
  EXPECT_THAT(r.out, HasSubstr(", restart 2): /bin/sh -c"));
}

TEST_F(LauncherTest, ExitCodePolicyRestartsRetryableCodesAndFailsOnPermanentOnes) {
  // Run 1: exit 137; run 2: killed by SIGKILL (128+9); run 3: exit 3.
  ReplicaDef worker{
      "Worker", 1, "ExitCode",
      std::string(kCountRun) +
          "if [ $n = 1 ]; then exit 137; fi; if [ $n = 2 ]; then kill -KILL $$$$; fi; "
          "exit 3"};
  const Result r = Run(Options(WriteJob({worker})));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(Lines("runs.worker-0"), 3);
  EXPECT_THAT(r.out, HasSubstr("job-worker-0 exited with code 137; restarting"));
  EXPECT_THAT(r.out, HasSubstr("job-worker-0 killed by signal 9 (SIGKILL); restarting"));
  EXPECT_THAT(r.out, HasSubstr("job-worker-0 exited with code 3 (restartPolicy ExitCode)"));
  EXPECT_THAT(r.out, HasSubstr("[kubetrain run] job job Failed: ReplicaFailed: job-worker-0 "
                               "exited with code 3\n"));
}

TEST_F(LauncherTest, NeverFailsTheJobOnTheFirstFailure) {
  ReplicaDef ps{"PS", 1, "Never", "while :; do sleep 0.05; done"};
  ReplicaDef worker{"Worker", 2, "Never",
                    std::string(kCountRun) +
                        "if [ \"$KUBETRAIN_REPLICA_INDEX\" = 1 ]; then exit 2; fi; "
                        "while :; do sleep 0.05; done"};
  const Result r = Run(Options(WriteJob({ps, worker})));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(Lines("runs.worker-1"), 1);
  EXPECT_THAT(r.out, HasSubstr("Failed: ReplicaFailed: job-worker-1 exited with code 2"));
  // The others were stopped: grace, then SIGTERM.
  EXPECT_THAT(r.out, HasSubstr("sending SIGTERM to job-ps-0, job-worker-0"));
}

TEST_F(LauncherTest, BackoffLimitAllowsThatManyRestarts) {
  ReplicaDef worker{"Worker", 1, "OnFailure", std::string(kCountRun) + "exit 1"};
  const Result r = Run(Options(WriteJob({worker}, {{"backoffLimit", 2}})));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(Lines("runs.worker-0"), 3);  // the first run and two restarts
  EXPECT_THAT(r.out, HasSubstr("Failed: BackoffLimitExceeded: the job has reached the specified "
                               "backoff limit (2 restarts); job-worker-0 exited with code 1"));
}

TEST_F(LauncherTest, BackoffLimitCountsRestartsOfAllReplicas) {
  // Worker 1 fails once (restart 1), then runs on; worker 0 fails once after
  // that (restart 2), which exceeds backoffLimit 1.
  ReplicaDef worker{
      "Worker", 2, "OnFailure",
      std::string(kCountRun) +
          "if [ \"$KUBETRAIN_REPLICA_INDEX\" = 1 ]; then "
          "if [ $n = 1 ]; then exit 1; fi; while :; do sleep 0.05; done; fi; "
          "while [ ! -s \"$D/runs.worker-1\" ] || [ `wc -l < \"$D/runs.worker-1\"` -lt 2 ]; "
          "do sleep 0.01; done; "
          "exit 1"};
  const Result r = Run(Options(WriteJob({worker}, {{"backoffLimit", 1}})));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(Lines("runs.worker-0"), 1);
  EXPECT_EQ(Lines("runs.worker-1"), 2);
  EXPECT_THAT(r.out, HasSubstr("Failed: BackoffLimitExceeded: the job has reached the specified "
                               "backoff limit (1 restarts); job-worker-0 exited with code 1"));
}

TEST_F(LauncherTest, DefaultSuccessPolicyNeedsOnlyWorkerZero) {
  ReplicaDef worker{"Worker", 2, "OnFailure",
                    std::string(kCountRun) +
                        "if [ \"$KUBETRAIN_REPLICA_INDEX\" = 0 ]; then exit 0; fi; "
                        "while :; do sleep 0.05; done"};
  const Result r = Run(Options(WriteJob({worker})));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(Lines("runs.worker-0"), 1);
  EXPECT_THAT(r.out, HasSubstr("job succeeded; waiting up to 0.3s for job-worker-1 to exit"));
  EXPECT_THAT(r.out, HasSubstr("sending SIGTERM to job-worker-1"));
}

TEST_F(LauncherTest, DefaultSuccessPolicyFollowsTheChief) {
  // Worker 0 finishes first and the job goes on until the chief finishes.
  ReplicaDef chief{"Chief", 1, "Never", WaitUntilGone("w0.pid") + "exit 0"};
  ReplicaDef worker{"Worker", 1, "Never", "echo $$$$ > \"$D/w0.pid\"; exit 0"};
  const Result r = Run(Options(WriteJob({chief, worker})));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("job-worker-0 exited with code 0; completed"));
  EXPECT_THAT(r.out, HasSubstr("job-chief-0 exited with code 0\n"));
}

TEST_F(LauncherTest, AllWorkersWaitsForEveryWorkerAndNeverRerunsACompletedOne) {
  // Worker 0 finishes first; worker 1 only after it, then the job succeeds.
  ReplicaDef worker{"Worker", 2, "OnFailure",
                    std::string(kCountRun) +
                        "if [ \"$KUBETRAIN_REPLICA_INDEX\" = 0 ]; then echo $$$$ > \"$D/w0.pid\"; "
                        "exit 0; fi; " +
                        WaitUntilGone("w0.pid") + "echo x > \"$D/w1\"; exit 0"};
  const Result r = Run(Options(WriteJob({worker}, json::object(), "AllWorkers")));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(ReadPlain(dir_.File("w1")), "x\n");
  EXPECT_EQ(Lines("runs.worker-0"), 1);
  EXPECT_EQ(Lines("runs.worker-1"), 1);
  EXPECT_THAT(r.out, HasSubstr("job-worker-0 exited with code 0; completed"));
  EXPECT_THAT(r.out, Not(HasSubstr("SIGTERM")));
}

TEST_F(LauncherTest, AlwaysDoesNotRestartOnceTheJobHasFinished) {
  ReplicaDef worker{"Worker", 1, "Always", std::string(kCountRun) + "exit 0"};
  const Result r = Run(Options(WriteJob({worker})));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(Lines("runs.worker-0"), 1);
}

TEST_F(LauncherTest, PsLeftRunningIsTerminatedAfterSuccess) {
  ReplicaDef ps{"PS", 1, "OnFailure", "echo $$$$ > \"$D/ps.pid\"; while :; do sleep 0.05; done"};
  ReplicaDef worker{"Worker", 1, "ExitCode", WaitFor("ps.pid") + "exit 0"};
  LaunchOptions options = Options(WriteJob({ps, worker}));
  // Long enough for a loaded machine to reap the PS after SIGTERM, so that
  // "no SIGKILL" below is about the launcher, not about the scheduler.
  options.grace = std::chrono::seconds(2);
  const Result r = Run(options);
  EXPECT_EQ(r.code, 0) << r.out;
  const pid_t pid = std::stoi(ReadPlain(dir_.File("ps.pid")));
  EXPECT_NE(kill(pid, 0), 0);
  EXPECT_EQ(errno, ESRCH);
  EXPECT_THAT(r.out, HasSubstr("still running after 2.0s: sending SIGTERM to job-ps-0"));
  EXPECT_THAT(r.out, HasSubstr("job-ps-0 killed by signal 15 (SIGTERM)"));
  EXPECT_THAT(r.out, Not(HasSubstr("SIGKILL")));
}

TEST_F(LauncherTest, PsIgnoringSigtermIsKilledAfterGrace) {
  ReplicaDef ps{"PS", 1, "OnFailure",
                "trap '' TERM; echo $$$$ > \"$D/ps.pid\"; while :; do sleep 0.05; done"};
  ReplicaDef worker{"Worker", 1, "ExitCode", WaitFor("ps.pid") + "exit 0"};
  const Result r = Run(Options(WriteJob({ps, worker})));
  EXPECT_EQ(r.code, 0) << r.out;
  const pid_t pid = std::stoi(ReadPlain(dir_.File("ps.pid")));
  EXPECT_NE(kill(pid, 0), 0);
  EXPECT_EQ(errno, ESRCH);
  EXPECT_THAT(r.out, HasSubstr("sending SIGTERM to job-ps-0"));
  EXPECT_THAT(r.out, HasSubstr("still running after 0.3s: sending SIGKILL to job-ps-0"));
  EXPECT_THAT(r.out, HasSubstr("job-ps-0 killed by signal 9 (SIGKILL)"));
  EXPECT_GE(r.seconds, 0.6);  // grace twice
  EXPECT_LT(r.seconds, 20.0);
}

TEST_F(LauncherTest, ActiveDeadlineFailsTheJob) {
  ReplicaDef worker{"Worker", 1, "OnFailure", "while :; do sleep 0.05; done"};
  const Result r = Run(Options(WriteJob({worker}, {{"activeDeadlineSeconds", 1}})));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_GE(r.seconds, 1.0);
  EXPECT_THAT(r.out, HasSubstr("Failed: DeadlineExceeded: the job ran longer than "
                               "activeDeadlineSeconds (1s)"));
  EXPECT_THAT(r.out, HasSubstr("sending SIGTERM to job-worker-0"));
}

TEST_F(LauncherTest, UnstartableReplicaFailsTheJob) {
  const std::string path = WriteJob({{"Worker", 1, "OnFailure", "exit 0"}});
  std::string text = ReadPlain(path);
  text.replace(text.find("\"/bin/sh\""), 9, "\"/nonexistent/sh\"");
  std::ofstream(path) << text;
  const Result r = Run(Options(path));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("job-worker-0 failed to start: cannot execute /nonexistent/sh"));
  EXPECT_THAT(r.out, HasSubstr("Failed: StartError: job-worker-0: cannot execute"));
}

TEST_F(LauncherTest, ContainerWithoutCommandRunsSelfExeWithArgs) {
  json job = {
      {"apiVersion", "kubetrain.io/v1alpha1"},
      {"kind", "TrainingJob"},
      {"metadata", {{"name", "self"}}},
      {"spec",
       {{"replicaSpecs",
         {{"Worker",
           {{"template",
             {{"spec",
               {{"containers",
                 json::array({{{"name", "kubetrain"},
                               {"image", "kubetrain:latest"},
                               {"args", json::array({"-c", "echo self $0 $1",
                                                     "$(KUBETRAIN_REPLICA_TYPE)"})}}})}}}}}}}}}}}};
  const std::string path = dir_.File("self.json");
  std::ofstream(path) << job.dump();
  LaunchOptions o = Options(path);
  o.self_exe = "/bin/sh";
  const Result r = Run(o);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("[self-worker-0] self worker\n"));

  o.self_exe.clear();
  const Result no_self = Run(o);
  EXPECT_EQ(no_self.code, 1);
  EXPECT_THAT(no_self.err, HasSubstr("containers[0].command: not set"));
}

TEST_F(LauncherTest, InvalidSpecIsOneErrorLine) {
  const std::string path = dir_.File("bad.yaml");
  std::ofstream(path) << R"yaml(apiVersion: kubetrain.io/v1alpha1
kind: TrainingJob
metadata: {name: bad}
spec:
  replicaSpecs:
    Worker: {replicas: -1, template: {spec: {containers: [{name: c, image: i}]}}}
)yaml";
  const Result r = Run(Options(path));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "kubetrain: error: " + path +
                       ": spec.replicaSpecs.Worker.replicas: must be >= 0, got -1\n");
  EXPECT_EQ(r.out, "");

  const Result missing = Run(Options(dir_.File("missing.yaml")));
  EXPECT_EQ(missing.code, 1);
  EXPECT_THAT(missing.err, HasSubstr("kubetrain: error: cannot read "));
  EXPECT_THAT(missing.err, HasSubstr("No such file or directory"));
}

// RunJob in a forked child, interrupted with `sig`: the signal reaches the
// replicas and the launcher exits 128 + sig.
void ExpectSignalForwarded(LauncherTest* t, const TempDir& dir, const std::string& job_file,
                           const LaunchOptions& options, int sig) {
  const std::string out_file = dir.File("run.out");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::ofstream out(out_file), err(dir.File("run.err"));
    absl::StatusOr<int> code = RunJob(options, out, err);
    out.flush();
    err.flush();
    _exit(code.ok() ? *code : 99);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ReadPlain(dir.File("ready")).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_FALSE(ReadPlain(dir.File("ready")).empty()) << "replica never became ready";
  ASSERT_EQ(kill(child, sig), 0);
  int status = 0;
  pid_t got = 0;
  while ((got = waitpid(child, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (got == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    FAIL() << "launcher did not exit after the signal";
  }
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + sig);
  EXPECT_EQ(ReadPlain(dir.File("got")), std::to_string(sig) + "\n");
  const std::string out = ReadPlain(out_file);
  EXPECT_THAT(out, HasSubstr("Failed: Interrupted: received "));
  EXPECT_THAT(out, HasSubstr("; stopping the job"));
}

TEST_F(LauncherTest, SigtermAndSigintAreForwarded) {
  for (int sig : {SIGTERM, SIGINT}) {
    SCOPED_TRACE(sig);
    std::remove(dir_.File("ready").c_str());
    std::remove(dir_.File("got").c_str());
    ReplicaDef worker{"Worker", 1, "OnFailure",
                      "trap 'echo 15 > \"$D/got\"; exit 0' TERM; "
                      "trap 'echo 2 > \"$D/got\"; exit 0' INT; "
                      "echo ready > \"$D/ready\"; while :; do sleep 0.05; done"};
    ExpectSignalForwarded(this, dir_, WriteJob({worker}), Options(dir_.File("job.json")), sig);
  }
}

}  // namespace
}  // namespace kubetrain::launcher
