// RunningProcess: a child process whose stdout and stderr are collected in
// the background, with waits on its output and its exit bounded by
// deadlines. For integration tests. Methods are called from one test
// thread; output collection is internally synchronised.
#ifndef KUBETRAIN_TESTS_SUPPORT_RUNNING_PROCESS_H_
#define KUBETRAIN_TESTS_SUPPORT_RUNNING_PROCESS_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/launcher/process.h"

namespace kubetrain::testing_util {

class RunningProcess {
 public:
  // Starts argv with this process's environment plus `extra_env`
  // ("NAME=value", overriding). Fails the test when it cannot start.
  RunningProcess(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env);
  ~RunningProcess();  // SIGKILLs the process group if it still runs

  pid_t pid() const;
  void Signal(int sig);
  // Exit code (128+sig when signalled), or -1 on timeout.
  int Wait(std::chrono::seconds timeout);
  bool exited() const { return exit_code_ >= 0; }
  int exit_code() const { return exit_code_; }

  std::string Output() const;  // stdout and stderr interleaved as read
  bool WaitForOutput(const std::function<bool(const std::string&)>& pred,
                     std::chrono::seconds timeout);

 private:
  void Reap();
  std::unique_ptr<launcher::Process> process_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string output_;
  std::vector<std::thread> readers_;
  int exit_code_ = -1;
};

// The value after `key=` in the last place `text` has it, or NaN.
double LastValue(const std::string& text, const std::string& key);

}  // namespace kubetrain::testing_util

#endif  // KUBETRAIN_TESTS_SUPPORT_RUNNING_PROCESS_H_
