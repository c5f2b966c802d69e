// LocalReplicas: starts `kubetrain train` replicas as real processes on
// loopback with the TF_CONFIG a pod would get (no launcher in between),
// collects each one's output, and waits on conditions with deadlines.
// For integration tests. Not thread-safe (one test thread drives it;
// internal reader threads only append output under a lock).
#ifndef KUBETRAIN_TESTS_SUPPORT_LOCAL_REPLICAS_H_
#define KUBETRAIN_TESTS_SUPPORT_LOCAL_REPLICAS_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/launcher/process.h"

namespace kubetrain::testing_util {

class LocalReplicas {
 public:
  // `binary`: the kubetrain executable. Ports are picked free on 127.0.0.1.
  LocalReplicas(std::string binary, int num_ps, int num_workers);
  ~LocalReplicas();  // kills whatever still runs

  // TF_CONFIG for replica `type` ("ps"/"worker") `index`.
  std::string TfConfig(const std::string& type, int index) const;
  const std::vector<std::string>& ps_addresses() const { return ps_; }

  // Starts (or restarts) `kubetrain train <args>` as type-index.
  void Start(const std::string& type, int index, const std::vector<std::string>& args,
             const std::vector<std::string>& extra_env = {});
  // Starts every PS and worker with the same args.
  void StartAll(const std::vector<std::string>& args);

  void Kill(const std::string& type, int index, int sig);
  // Waits for one replica's exit; -1 on timeout. 128+sig when signalled.
  int Wait(const std::string& type, int index, std::chrono::seconds timeout);
  // Waits until every replica has exited; false on timeout.
  bool WaitAll(std::chrono::seconds timeout);
  int ExitCode(const std::string& type, int index) const;

  std::string Output(const std::string& type, int index) const;
  // Waits until `pred(output)` holds for the replica; false on timeout.
  bool WaitForOutput(const std::string& type, int index,
                     const std::function<bool(const std::string&)>& pred,
                     std::chrono::seconds timeout);

 private:
  struct Replica {
    std::unique_ptr<launcher::Process> process;
    std::string output;
    std::vector<std::thread> readers;
    int exit_code = -1;
  };
  static std::string Key(const std::string& type, int index);
  void Reap(Replica& r);

  std::string binary_;
  std::vector<std::string> ps_, workers_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::unique_ptr<Replica>> replicas_;
};

// The value after `key=` in the last line of `text` that contains it, or NaN.
double LastValue(const std::string& text, const std::string& key);

}  // namespace kubetrain::testing_util

#endif  // KUBETRAIN_TESTS_SUPPORT_LOCAL_REPLICAS_H_
