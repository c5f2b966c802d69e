// The operator bench against a real API server (KUBETRAIN_TEST_KUBECONFIG):
// our TrainingJob controller and kube-controller-manager's Job controller
// creating the same number of pods on the same server in the same run
// (docs/benchmarks.md, "Operator on a real API server").
#ifndef KUBETRAIN_BENCH_OPERATOR_REAL_CLUSTER_H_
#define KUBETRAIN_BENCH_OPERATOR_REAL_CLUSTER_H_

#include <string>
#include <vector>

#include "operator/kube/throttled_transport.h"

namespace kubetrain::bench {

struct RealClusterOptions {
  int jobs = 500;
  std::vector<int> workers = {4};  // the operator's --workers, one run each
  // ControllerOptions::action_threads of the in-process runs, one run each
  // (x workers); 0: the workers send a pass's requests themselves.
  std::vector<int> action_threads = {16};
  kube::ThrottleOptions throttle;  // the operator's --kube-api-qps/--kube-api-burst
  std::string service_mode = "PerReplica";
  int create_threads = 8;  // clients creating the jobs
  // Leave the runs' namespaces on the server (a throwaway control plane):
  // deleting thousands of pods takes minutes on 2 cores.
  bool keep_namespaces = false;
  bool in_process = true;      // our controller in the bench's process
  bool job_controller = true;  // also time the Job controller
  // Also run this kubetrain-operator binary (its peak RSS); "" = skip.
  std::string operator_binary;
  // The binary predates --kube-api-qps/--kube-api-burst (a build of an older
  // commit, for before/after figures): run it without them (no limit).
  bool binary_without_rate_limit = false;
  // Run the kubetrain-operator binary before the in-process controller and
  // the Job controller: the run that comes later finds the earlier runs'
  // 2,000 pods (and Services, Secrets) on the server, which slows it.
  bool binary_first = false;
  // What kube-controller-manager was started with, for the report
  // (KCM_EXTRA); the bench cannot see it.
  std::string kcm_rate_limit = "--kube-api-qps=20 --kube-api-burst=30 (its defaults)";
};

// Returns 0 when every run created every pod. Prints why and returns 0 when
// KUBETRAIN_TEST_KUBECONFIG is not set.
int RunRealCluster(const RealClusterOptions& options);

}  // namespace kubetrain::bench

#endif  // KUBETRAIN_BENCH_OPERATOR_REAL_CLUSTER_H_
