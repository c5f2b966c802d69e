#include "operator/controller/failure_policy.h"

#include "absl/strings/str_cat.h"

namespace kubetrain::controller {

std::string DescribeFailure(const FailedReplica& failed) {
  return absl::StrCat(api::ReplicaTypeLower(failed.type), "-", failed.index, " (pod ",
                      failed.pod_name, failed.node.empty() ? "" : " on ", failed.node, ") ",
                      failed.state.empty() ? failed.exit.Describe() + failed.detail : failed.state,
                      " [", api::FailureReasonName(failed.reason), "]",
                      failed.message.empty() ? "" : ": ", failed.message);
}

int MaxDisruptions(const api::RunPolicy& run_policy) {
  return run_policy.max_disruptions.value_or(api::kDefaultMaxDisruptions);
}

FailureDecision DecideFailures(const std::string& job_name, const api::RunPolicy& run_policy,
                               int total_restarts, int disruptions,
                               const std::vector<FailedReplica>& failed) {
  FailureDecision d;
  // Disruptions first: the replica did nothing wrong, and its recreation
  // does not count toward the backoff limit.
  std::vector<bool> handled(failed.size(), false);
  for (size_t i = 0; i < failed.size(); ++i) {
    if (!api::IsDisruption(failed[i].reason) || disruptions >= MaxDisruptions(run_policy)) {
      continue;
    }
    ++disruptions;
    d.disrupted.push_back(i);
    handled[i] = true;
  }
  if (api::ExceedsBackoffLimit(run_policy, total_restarts)) {
    d.fail = JobFailure{
        "BackoffLimitExceeded",
        absl::StrCat(
            "TrainingJob ", job_name,
            " has failed because it has reached the specified "
            "backoff limit (",
            total_restarts, " restarts, backoffLimit ", run_policy.backoff_limit.value_or(0), ")",
            failed.empty() ? std::string()
                           : absl::StrCat("; last failure: ", DescribeFailure(failed[0])))};
    return d;
  }
  for (size_t i = 0; i < failed.size(); ++i) {
    if (handled[i]) continue;
    const api::ExitAction action = api::DecideOnExit(failed[i].policy, failed[i].exit);
    if (action == api::ExitAction::kRestart) {
      if (api::ExceedsBackoffLimit(run_policy, total_restarts + 1)) {
        d.fail = JobFailure{"BackoffLimitExceeded",
                            absl::StrCat("TrainingJob ", job_name,
                                         " has failed because it has reached the "
                                         "specified backoff limit: ",
                                         DescribeFailure(failed[i]))};
        return d;
      }
      ++total_restarts;
      d.restart.push_back(i);
      continue;
    }
    if (action == api::ExitAction::kFailJob) {
      d.fail = JobFailure{
          "ReplicaFailed",
          absl::StrCat("TrainingJob ", job_name, " has failed: ", DescribeFailure(failed[i]))};
      return d;
    }
  }
  return d;
}

}  // namespace kubetrain::controller
