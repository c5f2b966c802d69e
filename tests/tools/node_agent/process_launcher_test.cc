#include "tools/node_agent/process_launcher.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <sstream>

#include "tests/support/temp_files.h"
#include "tests/support/wait_for.h"

namespace kubetrain::node_agent {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::optional<int> WaitExit(RealProcessLauncher& l, int pid) {
  std::optional<int> code;
  testing_util::WaitFor([&] { return (code = l.PollExit(pid)).has_value(); });
  return code;
}

TEST(ProcessLauncherTest, RunsWithExactlyItsEnvironmentAndAppendsOutput) {
  data::testing_util::TempDir dir;
  RealProcessLauncher launcher;
  LaunchSpec spec;
  spec.argv = {"sh", "-c", "echo \"$GREETING from $(pwd)\"; echo err >&2; exit 3"};
  spec.env = {{"PATH", "/usr/bin:/bin"}, {"GREETING", "hello"}};
  spec.log_path = dir.File("c.log");
  spec.working_dir = dir.path();
  absl::StatusOr<int> pid = launcher.Launch(spec);
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_EQ(WaitExit(launcher, *pid), 3);
  ASSERT_TRUE(launcher.Launch(spec).ok());  // a restart appends
  testing_util::WaitFor([&] { return Read(spec.log_path).size() > 2 * 10; });
  const std::string log = Read(spec.log_path);
  EXPECT_NE(log.find("hello from " + dir.path() + "\nerr\n"), std::string::npos) << log;
}

TEST(ProcessLauncherTest, SignalReachesTheWholeGroupAndCodeIs128PlusSignal) {
  data::testing_util::TempDir dir;
  RealProcessLauncher launcher;
  LaunchSpec spec;
  // A child in the same group that would outlive its parent without the
  // group signal.
  spec.argv = {"sh", "-c", "sleep 300 & echo $! > child.pid; wait"};
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  spec.log_path = dir.File("c.log");
  spec.working_dir = dir.path();
  absl::StatusOr<int> pid = launcher.Launch(spec);
  ASSERT_TRUE(pid.ok());
  ASSERT_TRUE(testing_util::WaitFor([&] { return !Read(dir.File("child.pid")).empty(); }));
  const int child = std::stoi(Read(dir.File("child.pid")));
  launcher.SignalGroup(*pid, SIGTERM);
  EXPECT_EQ(WaitExit(launcher, *pid), 128 + SIGTERM);
  EXPECT_TRUE(testing_util::WaitFor([&] { return kill(child, 0) != 0; }));
}

TEST(ProcessLauncherTest, MissingProgramExits127WithTheReasonInTheLog) {
  data::testing_util::TempDir dir;
  RealProcessLauncher launcher;
  LaunchSpec spec;
  spec.argv = {"/nonexistent/kubetrain"};
  spec.log_path = dir.File("c.log");
  absl::StatusOr<int> pid = launcher.Launch(spec);
  ASSERT_TRUE(pid.ok());
  EXPECT_EQ(WaitExit(launcher, *pid), 127);
  EXPECT_NE(Read(spec.log_path).find("exec /nonexistent/kubetrain"), std::string::npos);
}

}  // namespace
}  // namespace kubetrain::node_agent
