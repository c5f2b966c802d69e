#include "runtime/launcher/process.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "tests/support/wait_for.h"

namespace kubetrain::launcher {
namespace {

using ::testing::HasSubstr;

// Reads a non-blocking fd to end of file (or the deadline) and closes it.
std::string ReadAll(int fd, std::chrono::seconds timeout = std::chrono::seconds(10)) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0 || errno != EAGAIN) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p = {fd, POLLIN, 0};
    poll(&p, 1, static_cast<int>(left.count()));
  }
  close(fd);
  return out;
}

// True when `pid` no longer exists or is a zombie waiting for its reaper.
bool Gone(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string content((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = content.rfind(')');
  return paren != std::string::npos && paren + 2 < content.size() && content[paren + 2] == 'Z';
}

TEST(ProcessTest, CapturesOutputAndExitCode) {
  absl::StatusOr<std::unique_ptr<Process>> p =
      Process::Spawn({{"/bin/sh", "-c", "echo out; echo err >&2; exit 7"}, {"PATH=/usr/bin:/bin"}});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_GT((*p)->pid(), 0);
  EXPECT_EQ(ReadAll((*p)->ReleaseStdout()), "out\n");
  EXPECT_EQ(ReadAll((*p)->ReleaseStderr()), "err\n");
  EXPECT_EQ((*p)->ReleaseStdout(), -1);
  EXPECT_EQ((*p)->Wait(), api::ReplicaExit::Code(7));
  EXPECT_TRUE((*p)->exited());
}

TEST(ProcessTest, EnvironmentIsExactlyTheGivenOne) {
  absl::StatusOr<std::unique_ptr<Process>> p =
      Process::Spawn({{"/usr/bin/env"}, {"A=1", "B=two words"}});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(ReadAll((*p)->ReleaseStdout()), "A=1\nB=two words\n");
  EXPECT_TRUE((*p)->Wait().Succeeded());
}

TEST(ProcessTest, LooksUpProgramsInTheChildsPath) {
  absl::StatusOr<std::unique_ptr<Process>> p =
      Process::Spawn({{"sh", "-c", "exit 0"}, {"PATH=/nonexistent:/bin:/usr/bin"}});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE((*p)->Wait().Succeeded());

  absl::StatusOr<std::unique_ptr<Process>> missing =
      Process::Spawn({{"sh", "-c", "exit 0"}, {"PATH=/nonexistent"}});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("\"sh\" not found in PATH"));
}

TEST(ProcessTest, ExecFailureIsAnError) {
  absl::StatusOr<std::unique_ptr<Process>> p = Process::Spawn({{"/nonexistent/program"}, {}});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(p.status().message()),
              HasSubstr("cannot execute /nonexistent/program: No such file or directory"));
  absl::StatusOr<std::unique_ptr<Process>> not_exec = Process::Spawn({{"/etc/hostname"}, {}});
  EXPECT_FALSE(not_exec.ok());
}

TEST(ProcessTest, SignalReachesTheWholeGroup) {
  // The shell waits on a background sleep: both are in the group.
  absl::StatusOr<std::unique_ptr<Process>> p =
      Process::Spawn({{"/bin/sh", "-c", "sleep 100 & echo $!; wait"}, {"PATH=/usr/bin:/bin"}});
  ASSERT_TRUE(p.ok()) << p.status();
  const int out = (*p)->ReleaseStdout();
  std::string line;
  ASSERT_TRUE(testing_util::WaitFor(
      [&] {
        char buf[64];
        const ssize_t n = read(out, buf, sizeof(buf));
        if (n > 0) line.append(buf, static_cast<size_t>(n));
        return line.find('\n') != std::string::npos;
      },
      absl::Seconds(10)));
  const pid_t sleeper = std::stoi(line);
  EXPECT_FALSE((*p)->Poll().has_value());
  ASSERT_TRUE((*p)->Signal(SIGTERM).ok());
  EXPECT_EQ((*p)->Wait(), api::ReplicaExit::Signal(SIGTERM));
  EXPECT_TRUE(testing_util::WaitFor([&] { return Gone(sleeper); }, absl::Seconds(10)));
  EXPECT_TRUE((*p)->Signal(SIGKILL).ok());  // already gone: fine
  close(out);
}

TEST(ProcessTest, LeftoversAreKilledWhenTheMainProcessExits) {
  absl::StatusOr<std::unique_ptr<Process>> p =
      Process::Spawn({{"/bin/sh", "-c", "sleep 100 & echo $!; exit 0"}, {"PATH=/usr/bin:/bin"}});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE((*p)->Wait().Succeeded());
  // Once the shell is reaped, its group is killed; the pipe reaches EOF.
  const std::string out = ReadAll((*p)->ReleaseStdout());
  const pid_t sleeper = std::stoi(out);
  EXPECT_TRUE(testing_util::WaitFor([&] { return Gone(sleeper); }, absl::Seconds(10)));
}

TEST(ProcessTest, DestructorKillsARunningChild) {
  pid_t pid;
  {
    absl::StatusOr<std::unique_ptr<Process>> p =
        Process::Spawn({{"/bin/sh", "-c", "while :; do sleep 1; done"}, {"PATH=/usr/bin:/bin"}});
    ASSERT_TRUE(p.ok()) << p.status();
    pid = (*p)->pid();
  }
  EXPECT_TRUE(Gone(pid));
}

}  // namespace
}  // namespace kubetrain::launcher
