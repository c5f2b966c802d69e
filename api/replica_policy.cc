#include "api/replica_policy.h"

#include <string.h>  // sigabbrev_np

#include "absl/strings/str_cat.h"
#include "api/exit_codes.h"

namespace kubetrain::api {

std::string ReplicaExit::Describe() const {
  if (signal == 0) {
    // The runtime's code for a lost peer: the replica's own log names it.
    return absl::StrCat("exited with code ", exit_code,
                        exit_code == kExitPeerLost ? " (a lost peer)" : "");
  }
  const char* abbrev = sigabbrev_np(signal);
  if (abbrev == nullptr) return absl::StrCat("killed by signal ", signal);
  return absl::StrCat("killed by signal ", signal, " (SIG", abbrev, ")");
}

bool IsRetryableExitCode(int code) { return code >= 128; }

std::string ExitActionName(ExitAction action) {
  switch (action) {
    case ExitAction::kRestart:
      return "Restart";
    case ExitAction::kComplete:
      return "Complete";
    case ExitAction::kFailJob:
      return "FailJob";
  }
  return "Unknown";
}

ExitAction DecideOnExit(RestartPolicy policy, const ReplicaExit& exit) {
  switch (policy) {
    case RestartPolicy::kAlways:
      return ExitAction::kRestart;
    case RestartPolicy::kOnFailure:
      return exit.Succeeded() ? ExitAction::kComplete : ExitAction::kRestart;
    case RestartPolicy::kExitCode:
      if (exit.Succeeded()) return ExitAction::kComplete;
      return IsRetryableExitCode(exit.EffectiveCode()) ? ExitAction::kRestart
                                                       : ExitAction::kFailJob;
    case RestartPolicy::kNever:
      return exit.Succeeded() ? ExitAction::kComplete : ExitAction::kFailJob;
  }
  return ExitAction::kFailJob;
}

JobOutcome DecideJobOutcome(SuccessPolicy policy, bool has_chief,
                            const std::vector<ReplicaState>& replicas) {
  for (const ReplicaState& r : replicas) {
    if (r.phase != ReplicaPhase::kFailed) continue;
    const std::string who =
        r.name.empty() ? absl::StrCat(ReplicaTypeName(r.type), " replica ", r.index) : r.name;
    std::string detail = r.last_exit ? r.last_exit->Describe() : "failed";
    return {JobPhase::kFailed, "ReplicaFailed", absl::StrCat(who, " ", detail)};
  }
  bool any_deciding = false;
  bool all_succeeded = true;
  for (const ReplicaState& r : replicas) {
    const bool deciding = policy == SuccessPolicy::kAllWorkers
                              ? (r.type == ReplicaType::kChief || r.type == ReplicaType::kWorker)
                              : (has_chief ? r.type == ReplicaType::kChief
                                           : (r.type == ReplicaType::kWorker && r.index == 0));
    if (!deciding) continue;
    any_deciding = true;
    if (r.phase != ReplicaPhase::kSucceeded) all_succeeded = false;
  }
  if (any_deciding && all_succeeded) {
    return {JobPhase::kSucceeded, "",
            policy == SuccessPolicy::kAllWorkers
                ? "all workers succeeded"
                : (has_chief ? "the chief succeeded" : "worker 0 succeeded")};
  }
  return {JobPhase::kRunning, "", ""};
}

bool ExceedsBackoffLimit(const RunPolicy& policy, int restarts_including_this_one) {
  return policy.backoff_limit.has_value() && restarts_including_this_one > *policy.backoff_limit;
}

}  // namespace kubetrain::api
