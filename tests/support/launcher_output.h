// Reading `kubetrain run` output in tests: the pid of a replica's latest
// start and the highest progress step it printed. Pure functions.
#ifndef KUBETRAIN_TESTS_SUPPORT_LAUNCHER_OUTPUT_H_
#define KUBETRAIN_TESTS_SUPPORT_LAUNCHER_OUTPUT_H_

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <regex>
#include <string>

namespace kubetrain::testing_util {

// pid of replica `name` from the launcher's "started <name> (pid N)" lines
// (the last start, after restarts); -1 when it never started.
inline pid_t PidOf(const std::string& out, const std::string& name) {
  std::regex re("started " + name + " \\(pid ([0-9]+)");
  pid_t pid = -1;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it) {
    pid = std::stoi((*it)[1]);
  }
  return pid;
}

// The highest "progress step=N" replica `name` printed, or -1.
inline int64_t LastStep(const std::string& out, const std::string& name) {
  std::regex re("\\[" + name + "\\] progress step=([0-9]+)");
  int64_t step = -1;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it) {
    step = std::max<int64_t>(step, std::stoll((*it)[1]));
  }
  return step;
}

}  // namespace kubetrain::testing_util

#endif  // KUBETRAIN_TESTS_SUPPORT_LAUNCHER_OUTPUT_H_
