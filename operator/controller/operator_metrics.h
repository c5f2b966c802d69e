// OperatorMetrics: what the reconciler reports to Prometheus. An interface
// so the controller does not depend on the metrics library; main.cc wires
// the prometheus-cpp implementation (operator/metrics), tests may pass
// NoopOperatorMetrics. Implementations must be thread-safe.
#ifndef KUBETRAIN_OPERATOR_CONTROLLER_OPERATOR_METRICS_H_
#define KUBETRAIN_OPERATOR_CONTROLLER_OPERATOR_METRICS_H_

#include <map>
#include <string>

namespace kubetrain::controller {

class OperatorMetrics {
 public:
  virtual ~OperatorMetrics() = default;
  virtual void JobCreated(const std::string& ns) = 0;    // first reconcile of a new job
  virtual void JobSucceeded(const std::string& ns) = 0;  // transition to Succeeded
  virtual void JobFailed(const std::string& ns) = 0;     // transition to Failed
  virtual void JobRestarted(const std::string& ns) = 0;  // a replica restarted
  // A replica's pod failed (or cannot start) for `reason`
  // (api/failure_reason.h: OOMKilled, Preempted, ...).
  virtual void ReplicaFailed(const std::string& ns, const std::string& reason) = 0;
  virtual void PodCreated(const std::string& ns) = 0;
  // A job's runtime world formed a new generation (a worker lost, joined or
  // left: the MembershipChanged event). Not pure: implementations that do
  // not count it need not say so.
  virtual void MembershipChanged(const std::string& /*ns*/) {}
  // Current jobs per (namespace, phase): phase is the job's latest condition
  // type (Created, Running, Restarting, Succeeded, Failed, Suspended).
  virtual void SetJobPhases(const std::map<std::pair<std::string, std::string>, int>& counts) = 0;
  virtual void ObserveReconcile(double seconds, bool error) = 0;
  virtual void SetQueueDepth(int depth) = 0;
  virtual void SetLeader(bool leader) = 0;
};

class NoopOperatorMetrics final : public OperatorMetrics {
 public:
  void JobCreated(const std::string&) override {}
  void JobSucceeded(const std::string&) override {}
  void JobFailed(const std::string&) override {}
  void JobRestarted(const std::string&) override {}
  void ReplicaFailed(const std::string&, const std::string&) override {}
  void PodCreated(const std::string&) override {}
  void SetJobPhases(const std::map<std::pair<std::string, std::string>, int>&) override {}
  void ObserveReconcile(double, bool) override {}
  void SetQueueDepth(int) override {}
  void SetLeader(bool) override {}
};

}  // namespace kubetrain::controller

#endif  // KUBETRAIN_OPERATOR_CONTROLLER_OPERATOR_METRICS_H_
