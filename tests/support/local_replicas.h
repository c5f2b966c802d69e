// LocalReplicas: starts `kubetrain train` replicas as real processes on
// loopback with the TF_CONFIG a pod would get (no launcher in between).
// For integration tests; driven from one test thread.
#ifndef KUBETRAIN_TESTS_SUPPORT_LOCAL_REPLICAS_H_
#define KUBETRAIN_TESTS_SUPPORT_LOCAL_REPLICAS_H_

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/running_process.h"

namespace kubetrain::testing_util {

class LocalReplicas {
 public:
  // `binary`: the kubetrain executable. Ports are picked free on 127.0.0.1.
  // Evaluators are listed in the cluster spec as TFJob does.
  LocalReplicas(std::string binary, int num_ps, int num_workers, int num_evaluators = 0);

  // Elastic jobs: the TF_CONFIG of replicas started from now on lists only
  // the first `n` workers (what a pod created when the job had n workers
  // gets); -1: all of them.
  void SetVisibleWorkers(int n) { visible_workers_ = n; }
  // TF_CONFIG for replica `type` ("ps"/"worker") `index`.
  std::string TfConfig(const std::string& type, int index) const;
  const std::vector<std::string>& ps_addresses() const { return ps_; }

  // Starts `kubetrain train <args>` as type-index.
  void Start(const std::string& type, int index, const std::vector<std::string>& args,
             const std::vector<std::string>& extra_env = {});
  // Starts every PS and worker with the same args.
  void StartAll(const std::vector<std::string>& args);

  void Kill(const std::string& type, int index, int sig);
  // Exit code (128+sig when signalled), or -1 on timeout.
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
  static std::string Key(const std::string& type, int index);
  std::string binary_;
  std::vector<std::string> ps_, workers_, evaluators_;
  int visible_workers_ = -1;
  std::map<std::string, std::unique_ptr<RunningProcess>> replicas_;
};

}  // namespace kubetrain::testing_util

#endif  // KUBETRAIN_TESTS_SUPPORT_LOCAL_REPLICAS_H_
