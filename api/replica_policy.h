// Restart and success decisions over replica states: pure functions shared by
// `kubetrain run` and the operator, so both treat exits the same way.
//
// Per exit (DecideOnExit), by the replica type's restartPolicy:
//   OnFailure: exit 0 -> Complete; anything else -> Restart.
//   Always:    any exit -> Restart (the caller checks the job outcome first:
//              nothing is restarted once the job has finished).
//   ExitCode:  exit 0 -> Complete; 1..127 -> FailJob (permanent);
//              128+ (signals count as 128 + signal) -> Restart (retryable).
//              This is the code of Kubeflow's IsRetryableExitCode
//              (exitCode >= 128), not its documentation, which lists 1, 2,
//              126, 127, 128 and 139 (SIGSEGV) as permanent and only 130,
//              137, 138 and 143 as retryable. We differ on purpose: the
//              runtime exits 129 on a lost peer (kExitPeerLost), which must be
//              retried, and any death by signal (139 included: a crash in a
//              native library on one node) is retried within backoffLimit
//              rather than failing the job at once. The CRD's restartPolicy
//              description (kubectl explain) says the same.
//   Never:     exit 0 -> Complete; anything else -> FailJob.
// Job outcome (DecideJobOutcome): Failed as soon as a replica has failed;
// Succeeded when the Chief (or Worker 0 without a Chief) has succeeded, or,
// with successPolicy AllWorkers, when the Chief and every Worker have.
// PS and Evaluator replicas never decide success.
//
// Stateless and thread-safe.
#ifndef KUBETRAIN_API_REPLICA_POLICY_H_
#define KUBETRAIN_API_REPLICA_POLICY_H_

#include <optional>
#include <string>
#include <vector>

#include "api/training_job.h"

namespace kubetrain::api {

// How a replica's process ended: an exit code, or the signal that killed it.
struct ReplicaExit {
  int exit_code = 0;
  int signal = 0;  // non-zero: killed by this signal (exit_code unused)

  static ReplicaExit Code(int code) { return {code, 0}; }
  static ReplicaExit Signal(int sig) { return {0, sig}; }
  // The code Kubernetes reports: exit_code, or 128 + signal.
  int EffectiveCode() const { return signal != 0 ? 128 + signal : exit_code; }
  bool Succeeded() const { return signal == 0 && exit_code == 0; }
  // "exited with code 3" / "killed by signal 9 (SIGKILL)".
  std::string Describe() const;
  bool operator==(const ReplicaExit&) const = default;
};

// 128+ is retryable (signals, lost peer), 1..127 is permanent (see the
// header for how this differs from Kubeflow's documented list).
bool IsRetryableExitCode(int code);

enum class ExitAction { kRestart, kComplete, kFailJob };
std::string ExitActionName(ExitAction action);

ExitAction DecideOnExit(RestartPolicy policy, const ReplicaExit& exit);

enum class ReplicaPhase {
  kPending,     // not started yet
  kRunning,     // process alive
  kRestarting,  // exited, will be started again
  kSucceeded,   // exited 0 and will not run again (or is the deciding exit)
  kFailed,      // exited with a job-failing status
};

struct ReplicaState {
  ReplicaType type = ReplicaType::kWorker;
  int index = 0;
  ReplicaPhase phase = ReplicaPhase::kPending;
  std::optional<ReplicaExit> last_exit;
  std::string name;  // for messages, e.g. "fmnist-worker-1"; may be empty
};

enum class JobPhase { kRunning, kSucceeded, kFailed };

struct JobOutcome {
  JobPhase phase = JobPhase::kRunning;
  std::string reason;   // "ReplicaFailed" when failed; "" otherwise
  std::string message;  // human-readable detail
};

// `has_chief`: the job has at least one Chief replica (decides who counts).
JobOutcome DecideJobOutcome(SuccessPolicy policy, bool has_chief,
                            const std::vector<ReplicaState>& replicas);

// runPolicy.backoffLimit counts restarts of all replicas together: true when
// performing restart number `restarts_including_this_one` would exceed it.
bool ExceedsBackoffLimit(const RunPolicy& policy, int restarts_including_this_one);

}  // namespace kubetrain::api

#endif  // KUBETRAIN_API_REPLICA_POLICY_H_
