// `kubetrain run job.yaml`: runs every replica of a TrainingJob as a local
// process on 127.0.0.1 with the environment a pod would get, and applies the
// job's restart, success, backoff and deadline policies the way the operator
// does (decisions from api/replica_policy.h).
//
//  - Each replica gets its own free loopback port (TF_CONFIG and the host
//    lists of api/env_vars.h use 127.0.0.1:<port>), its own
//    api::kEnvMetricsPort, and the job's random api::kEnvJobToken. Its
//    environment is this process's minus every variable api/env_vars.h
//    names (the api::kEnvPrefix ones included), then ReplicaEnvironment(),
//    then the container's `env` (values may use $(VAR); valueFrom entries
//    cannot be resolved locally and are skipped with a warning).
//  - A container without `command` runs `self_exe` with its `args`; with a
//    `command` it runs command + args. $(VAR) in both is expanded from the
//    replica's environment. Each replica is its own process group.
//  - Output: each replica line as "[<job>-<type>-<index>] <line>" (stdout to
//    `out`, stderr to `err`); the launcher's own lines "[kubetrain run] ..."
//    to `out`, ending with "job <name> Succeeded in 12.3s" or
//    "job <name> Failed: <reason>: <message>".
//  - Exits: see api::DecideOnExit. Restarts wait restart_backoff, doubling per
//    replica up to max_restart_backoff. runPolicy.backoffLimit counts restarts
//    of all replicas together (reason BackoffLimitExceeded). A replica that
//    cannot be started fails the job (reason StartError).
//  - When the job succeeds or a replica fails it, the remaining replicas get
//    `grace` to exit on their own, then SIGTERM, then SIGKILL after another
//    `grace`. activeDeadlineSeconds (reason DeadlineExceeded) and SIGINT/
//    SIGTERM to this process (reason Interrupted; the signal is forwarded)
//    skip the first wait. A second SIGINT/SIGTERM sends SIGKILL at once.
//
// RunJob returns 0 when the job succeeded, 1 when it failed or the job file
// is unreadable or invalid (one "kubetrain: error: ..." line on `err`), and
// 128+signal when interrupted before the job finished. An error Status
// means the launcher itself could not work (pipes, fork, signals).
//
// RunJob installs process-wide SIGCHLD (and SIGINT/SIGTERM) handlers while
// it runs, so only one RunJob may run per process at a time, and children
// die with the calling thread (PR_SET_PDEATHSIG). Call it from the thread
// that will live until it returns, typically main().
#ifndef KUBETRAIN_RUNTIME_LAUNCHER_LAUNCHER_H_
#define KUBETRAIN_RUNTIME_LAUNCHER_LAUNCHER_H_

#include <chrono>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"

namespace kubetrain::launcher {

struct LaunchOptions {
  std::string job_file;  // YAML or JSON TrainingJob
  std::string self_exe;  // the kubetrain binary, for containers without `command`
  // Time to exit on their own after the job ends, then again after SIGTERM.
  std::chrono::milliseconds grace = std::chrono::seconds(10);
  // First restart delay of a replica; doubles per restart of that replica.
  std::chrono::milliseconds restart_backoff = std::chrono::seconds(1);
  std::chrono::milliseconds max_restart_backoff = std::chrono::seconds(10);
  // Handle SIGINT/SIGTERM (forward to replicas, exit 128+signal).
  bool handle_signals = true;
};

absl::StatusOr<int> RunJob(const LaunchOptions& options, std::ostream& out, std::ostream& err);

}  // namespace kubetrain::launcher

#endif  // KUBETRAIN_RUNTIME_LAUNCHER_LAUNCHER_H_
