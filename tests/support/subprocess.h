// RunProcess: runs a program to completion with a deadline, capturing its
// exit code, stdout and stderr. For tests that drive the real binaries.
// Thread-safe (no shared state).
#ifndef KUBETRAIN_TESTS_SUPPORT_SUBPROCESS_H_
#define KUBETRAIN_TESTS_SUPPORT_SUBPROCESS_H_

#include <chrono>
#include <string>
#include <vector>

namespace kubetrain::testing_util {

struct ProcessResult {
  int exit_code = -1;  // exit status, or 128 + signal when killed
  bool timed_out = false;
  std::string out;
  std::string err;
};

// argv[0] is the program path. Kills the process (SIGKILL) at the deadline.
ProcessResult RunProcess(const std::vector<std::string>& argv, std::chrono::seconds timeout);

}  // namespace kubetrain::testing_util

#endif  // KUBETRAIN_TESTS_SUPPORT_SUBPROCESS_H_
