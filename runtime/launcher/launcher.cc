#include "runtime/launcher/launcher.h"

#include <poll.h>
#include <signal.h>
#include <string.h>  // sigabbrev_np

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "api/cluster_spec.h"
#include "api/env_vars.h"
#include "api/replica_policy.h"
#include "api/training_job.h"
#include "runtime/launcher/job_token.h"
#include "runtime/launcher/loopback_ports.h"
#include "runtime/launcher/output_pump.h"
#include "runtime/launcher/process.h"
#include "runtime/launcher/signal_watcher.h"

extern char** environ;

namespace kubetrain::launcher {
namespace {

using Clock = std::chrono::steady_clock;
using api::JobOutcome;
using api::JobPhase;
using api::ReplicaPhase;
using api::ReplicaType;

constexpr char kLogPrefix[] = "[kubetrain run]";
constexpr auto kDrainWait = std::chrono::seconds(2);

// Variables the launcher sets itself; inherited values would mislead.
bool IsOwnedVariable(const std::string& name) {
  return name == api::kEnvTfConfig || name.rfind(api::kEnvPrefix, 0) == 0 ||
         name == api::kEnvMasterAddr || name == api::kEnvMasterPort || name == api::kEnvWorldSize ||
         name == api::kEnvRank;
}

// An environment in definition order where a later Set replaces the value.
class Environment {
 public:
  void Set(const std::string& name, const std::string& value) {
    auto it = index_.find(name);
    if (it != index_.end()) {
      vars_[it->second].second = value;
      return;
    }
    index_[name] = vars_.size();
    vars_.emplace_back(name, value);
  }
  const api::EnvList& vars() const { return vars_; }
  std::vector<std::string> Strings() const {
    std::vector<std::string> out;
    out.reserve(vars_.size());
    for (const auto& [k, v] : vars_) out.push_back(absl::StrCat(k, "=", v));
    return out;
  }

 private:
  api::EnvList vars_;
  std::unordered_map<std::string, size_t> index_;
};

std::string ShellQuote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_@%+=:,./-") == std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out.append("'\\''");
    } else {
      out.push_back(c);
    }
  }
  out.push_back('\'');
  return out;
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? absl::StrCat("SIG", abbrev) : absl::StrCat("signal ", sig);
}

std::string FormatSeconds(Clock::duration d) {
  return absl::StrFormat("%.1fs", std::chrono::duration<double>(d).count());
}

struct Replica {
  ReplicaType type = ReplicaType::kWorker;
  int index = 0;
  std::string name;
  api::RestartPolicy policy = api::RestartPolicy::kNever;
  std::vector<std::string> argv;
  std::vector<std::string> env;

  std::unique_ptr<Process> process;
  int out_stream = -1;
  int err_stream = -1;
  ReplicaPhase phase = ReplicaPhase::kPending;
  std::optional<api::ReplicaExit> last_exit;
  Clock::time_point restart_at;
  std::chrono::milliseconds backoff{0};
  int restarts = 0;
};

class JobRunner {
 public:
  JobRunner(const LaunchOptions& options, std::ostream& out, std::ostream& err)
      : options_(options), out_(out), err_(err), pump_(&writer_) {}

  absl::StatusOr<int> Run();

 private:
  enum class Stage { kRunning, kDraining, kTerminating, kKilling };

  void Log(const std::string& message) { writer_.Write(out_, kLogPrefix, message); }
  int UserError(const std::string& message) {
    writer_.Write(err_, "kubetrain: error:", message);
    return 1;
  }

  // Builds replicas_ (argv, env); returns a message for user errors.
  absl::StatusOr<std::optional<std::string>> Prepare();
  void Loop();
  void StartReplica(Replica& r);
  void ReapExits();
  void OnExit(Replica& r, const api::ReplicaExit& exit);
  void EndJob(JobOutcome outcome, int signal);
  void OnSignal(int sig);
  void AdvanceShutdown(Clock::time_point now);
  void SignalAll(int sig, const std::string& why);
  std::vector<std::string> RunningNames() const;
  bool AnyRunning() const;
  std::vector<api::ReplicaState> States() const;
  std::optional<Clock::time_point> NextTimer() const;

  const LaunchOptions& options_;
  std::ostream& out_;
  std::ostream& err_;
  LineWriter writer_;
  OutputPump pump_;
  std::unique_ptr<SignalWatcher> watcher_;

  api::TrainingJob job_;
  std::vector<Replica> replicas_;
  bool has_chief_ = false;
  Clock::time_point start_;
  std::optional<Clock::time_point> deadline_;
  int restarts_total_ = 0;

  Stage stage_ = Stage::kRunning;
  JobOutcome outcome_;
  Clock::time_point finished_at_;
  Clock::time_point term_at_;
  Clock::time_point kill_at_;
  int interrupted_by_ = 0;
};

absl::StatusOr<std::optional<std::string>> JobRunner::Prepare() {
  std::ifstream in(options_.job_file, std::ios::binary);
  if (!in) {
    return std::optional<std::string>(
        absl::StrCat("cannot read ", options_.job_file, ": ", std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<api::TrainingJob> job = api::LoadTrainingJob(text.str(), options_.job_file);
  if (!job.ok()) return std::optional<std::string>(std::string(job.status().message()));
  job_ = *std::move(job);
  if (job_.spec.run_policy.suspend) {
    return std::optional<std::string>(absl::StrCat(
        options_.job_file, ": spec.runPolicy.suspend is true: nothing runs until it is false"));
  }
  has_chief_ = job_.ReplicaCount(ReplicaType::kChief) > 0;

  int count = 0;
  for (const auto& [type, spec] : job_.spec.replica_specs) count += std::max(0, spec.Replicas());
  absl::StatusOr<std::vector<int>> ports = AllocateLoopbackPorts(2 * count);
  if (!ports.ok()) return ports.status();
  std::map<std::pair<ReplicaType, int>, int> service_port;
  std::map<std::pair<ReplicaType, int>, int> metrics_port;
  int next = 0;
  for (ReplicaType type : api::kAllReplicaTypes) {
    for (int i = 0; i < job_.ReplicaCount(type); ++i) {
      service_port[{type, i}] = (*ports)[next++];
      metrics_port[{type, i}] = (*ports)[next++];
    }
  }
  const api::ClusterSpec cluster = api::ClusterFor(job_, [&](ReplicaType type, int index) {
    return absl::StrCat("127.0.0.1:", service_port[{type, index}]);
  });
  const std::string token = NewJobToken();

  Environment inherited;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    const std::string name = kv.substr(0, eq);
    if (!IsOwnedVariable(name)) inherited.Set(name, kv.substr(eq + 1));
  }

  for (ReplicaType type : api::kAllReplicaTypes) {
    const api::ReplicaSpec* spec = job_.Find(type);
    if (spec == nullptr) continue;
    absl::StatusOr<api::Container> container = spec->FirstContainer();
    if (!container.ok())
      return std::optional<std::string>(std::string(container.status().message()));
    if (container->command.empty() && options_.self_exe.empty()) {
      return std::optional<std::string>(absl::StrCat(
          options_.job_file, ": spec.replicaSpecs.", api::ReplicaTypeName(type),
          ".template.spec.containers[0].command: not set, and there is no kubetrain binary to "
          "run the container's args with"));
    }
    for (int i = 0; i < spec->Replicas(); ++i) {
      Replica r;
      r.type = type;
      r.index = i;
      r.name = api::ReplicaName(job_, type, i);
      r.policy = spec->Restart();
      r.backoff = options_.restart_backoff;
      Environment env = inherited;
      for (const auto& [k, v] : api::ReplicaEnvironment(job_, cluster, type, i, token)) {
        env.Set(k, v);
      }
      env.Set(api::kEnvMetricsPort, absl::StrCat(metrics_port[{type, i}]));
      for (const api::EnvVar& var : container->env) {
        if (var.value_from) {
          if (i == 0) {
            Log(absl::StrCat("warning: ", api::ReplicaTypeName(type), " env ", var.name,
                             " uses valueFrom, which kubetrain run cannot resolve; it is not set"));
          }
          continue;
        }
        env.Set(var.name, api::ExpandVars(var.value, env.vars()));
      }
      if (container->command.empty()) {
        r.argv.push_back(options_.self_exe);
      } else {
        for (const std::string& c : container->command) {
          r.argv.push_back(api::ExpandVars(c, env.vars()));
        }
      }
      for (const std::string& a : container->args) r.argv.push_back(api::ExpandVars(a, env.vars()));
      r.env = env.Strings();
      replicas_.push_back(std::move(r));
    }
  }
  std::vector<std::string> layout;
  for (const auto& [type, hosts] : cluster.hosts) {
    layout.push_back(absl::StrCat(type, " ", absl::StrJoin(hosts, ",")));
  }
  Log(absl::StrCat("job ", job_.metadata.name, ": ", replicas_.size(), " replicas (",
                   absl::StrJoin(layout, "; "), ")"));
  return std::optional<std::string>();
}

absl::StatusOr<int> JobRunner::Run() {
  absl::StatusOr<std::optional<std::string>> prepared = Prepare();
  if (!prepared.ok()) return prepared.status();
  if (prepared->has_value()) return UserError(**prepared);

  absl::StatusOr<std::unique_ptr<SignalWatcher>> watcher =
      SignalWatcher::Install(options_.handle_signals);
  if (!watcher.ok()) return watcher.status();
  watcher_ = *std::move(watcher);
  if (absl::Status s = pump_.Start(); !s.ok()) return s;

  start_ = Clock::now();
  if (job_.spec.run_policy.active_deadline_seconds) {
    deadline_ = start_ + std::chrono::seconds(*job_.spec.run_policy.active_deadline_seconds);
  }
  for (Replica& r : replicas_) {
    if (stage_ != Stage::kRunning) break;
    StartReplica(r);
  }
  Loop();
  pump_.Stop();
  watcher_.reset();

  if (outcome_.phase == JobPhase::kSucceeded) {
    // Repeat the chief's summary so the last line states the result.
    std::string summary;
    for (const Replica& r : replicas_) {
      if (api::IsChiefRole(job_, r.type, r.index)) {
        summary = writer_.LastLineStartingWith(absl::StrCat("[", r.name, "]"), "final ");
      }
    }
    Log(absl::StrCat("job ", job_.metadata.name, " Succeeded in ",
                     FormatSeconds(finished_at_ - start_), summary.empty() ? "" : ": ", summary));
    return 0;
  }
  Log(absl::StrCat("job ", job_.metadata.name, " Failed: ", outcome_.reason, ": ",
                   outcome_.message));
  return interrupted_by_ != 0 ? 128 + interrupted_by_ : 1;
}

void JobRunner::StartReplica(Replica& r) {
  absl::StatusOr<std::unique_ptr<Process>> p = Process::Spawn({r.argv, r.env});
  if (!p.ok()) {
    Log(absl::StrCat(r.name, " failed to start: ", p.status().message()));
    r.phase = ReplicaPhase::kFailed;
    EndJob({JobPhase::kFailed, "StartError", absl::StrCat(r.name, ": ", p.status().message())}, 0);
    return;
  }
  r.process = *std::move(p);
  r.phase = ReplicaPhase::kRunning;
  std::vector<std::string> quoted;
  for (const std::string& a : r.argv) quoted.push_back(ShellQuote(a));
  Log(absl::StrCat("started ", r.name, " (pid ", r.process->pid(),
                   r.restarts > 0 ? absl::StrCat(", restart ", r.restarts) : "",
                   "): ", absl::StrJoin(quoted, " ")));
  const std::string prefix = absl::StrCat("[", r.name, "]");
  r.out_stream = pump_.Add(r.process->ReleaseStdout(), prefix, &out_);
  r.err_stream = pump_.Add(r.process->ReleaseStderr(), prefix, &err_);
}

void JobRunner::Loop() {
  for (;;) {
    ReapExits();
    const Clock::time_point now = Clock::now();
    if (stage_ == Stage::kRunning) {
      if (deadline_ && now >= *deadline_) {
        EndJob({JobPhase::kFailed, "DeadlineExceeded",
                absl::StrCat("the job ran longer than activeDeadlineSeconds (",
                             *job_.spec.run_policy.active_deadline_seconds, "s)")},
               SIGTERM);
      } else {
        for (Replica& r : replicas_) {
          if (stage_ == Stage::kRunning && r.phase == ReplicaPhase::kRestarting &&
              now >= r.restart_at) {
            StartReplica(r);
          }
        }
      }
      if (stage_ == Stage::kRunning && !AnyRunning() &&
          std::none_of(replicas_.begin(), replicas_.end(), [](const Replica& r) {
            return r.phase == ReplicaPhase::kRestarting || r.phase == ReplicaPhase::kPending;
          })) {
        EndJob({JobPhase::kFailed, "Incomplete",
                "every replica has exited but the success policy was not met"},
               0);
      }
    } else {
      AdvanceShutdown(now);
    }
    if (stage_ != Stage::kRunning && !AnyRunning()) return;

    int timeout_ms = -1;
    if (std::optional<Clock::time_point> next = NextTimer()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now()).count();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(left, 0, 60'000));
    }
    pollfd pfd = {watcher_->fd(), POLLIN, 0};
    const int n = poll(&pfd, 1, timeout_ms);
    if (n > 0 && (pfd.revents & POLLIN)) {
      for (int sig : watcher_->Drain()) {
        if (sig == SIGINT || sig == SIGTERM) OnSignal(sig);
        // SIGCHLD: ReapExits() at the top of the loop.
      }
    }
  }
}

std::optional<Clock::time_point> JobRunner::NextTimer() const {
  std::optional<Clock::time_point> next;
  auto consider = [&](Clock::time_point t) {
    if (!next || t < *next) next = t;
  };
  switch (stage_) {
    case Stage::kRunning:
      if (deadline_) consider(*deadline_);
      for (const Replica& r : replicas_) {
        if (r.phase == ReplicaPhase::kRestarting) consider(r.restart_at);
      }
      break;
    case Stage::kDraining:
      consider(term_at_);
      break;
    case Stage::kTerminating:
      consider(kill_at_);
      break;
    case Stage::kKilling:
      break;
  }
  return next;
}

void JobRunner::ReapExits() {
  for (Replica& r : replicas_) {
    if (!r.process) continue;
    std::optional<api::ReplicaExit> exit = r.process->Poll();
    if (!exit) continue;
    // Print what it wrote before saying it exited.
    const Clock::time_point until = Clock::now() + kDrainWait;
    pump_.WaitDrained(r.out_stream, until);
    pump_.WaitDrained(r.err_stream, until);
    r.process.reset();
    OnExit(r, *exit);
  }
}

void JobRunner::OnExit(Replica& r, const api::ReplicaExit& exit) {
  r.last_exit = exit;
  const std::string what = absl::StrCat(r.name, " ", exit.Describe());
  if (stage_ != Stage::kRunning) {
    Log(what);
    r.phase = exit.Succeeded() ? ReplicaPhase::kSucceeded : ReplicaPhase::kFailed;
    return;
  }
  const api::ExitAction action = api::DecideOnExit(r.policy, exit);
  r.phase = exit.Succeeded() ? ReplicaPhase::kSucceeded
                             : (action == api::ExitAction::kFailJob ? ReplicaPhase::kFailed
                                                                    : ReplicaPhase::kRestarting);
  const std::string policy = absl::StrCat("restartPolicy ", api::RestartPolicyName(r.policy));
  const JobOutcome outcome = api::DecideJobOutcome(job_.spec.success_policy, has_chief_, States());
  if (outcome.phase != JobPhase::kRunning) {
    Log(outcome.phase == JobPhase::kFailed ? absl::StrCat(what, " (", policy, ")") : what);
    EndJob(outcome, 0);
    return;
  }
  if (action != api::ExitAction::kRestart) {
    Log(absl::StrCat(what, "; completed"));
    return;
  }
  ++restarts_total_;
  if (api::ExceedsBackoffLimit(job_.spec.run_policy, restarts_total_)) {
    Log(absl::StrCat(what, " (", policy, ")"));
    r.phase = ReplicaPhase::kFailed;
    EndJob({JobPhase::kFailed, "BackoffLimitExceeded",
            absl::StrCat("the job has reached the specified backoff limit (",
                         *job_.spec.run_policy.backoff_limit, " restarts); ", what)},
           0);
    return;
  }
  r.phase = ReplicaPhase::kRestarting;
  ++r.restarts;
  r.restart_at = Clock::now() + r.backoff;
  Log(absl::StrCat(what, "; restarting in ", FormatSeconds(r.backoff), " (restart ", r.restarts,
                   ", ", policy, ")"));
  r.backoff = std::min(r.backoff * 2, options_.max_restart_backoff);
}

void JobRunner::EndJob(JobOutcome outcome, int signal) {
  if (stage_ != Stage::kRunning) return;
  outcome_ = std::move(outcome);
  finished_at_ = Clock::now();
  if (!AnyRunning()) {
    stage_ = Stage::kTerminating;
    kill_at_ = finished_at_;
    return;
  }
  const char* phase = outcome_.phase == JobPhase::kSucceeded ? "succeeded" : "failed";
  if (signal == 0) {
    stage_ = Stage::kDraining;
    term_at_ = finished_at_ + options_.grace;
    Log(absl::StrCat("job ", phase, "; waiting up to ", FormatSeconds(options_.grace), " for ",
                     absl::StrJoin(RunningNames(), ", "), " to exit"));
    return;
  }
  SignalAll(signal, absl::StrCat("job ", phase, " (", outcome_.reason, ")"));
  stage_ = Stage::kTerminating;
  kill_at_ = finished_at_ + options_.grace;
}

void JobRunner::OnSignal(int sig) {
  switch (stage_) {
    case Stage::kRunning:
      interrupted_by_ = sig;
      Log(absl::StrCat("received ", SignalName(sig), "; stopping the job"));
      EndJob({JobPhase::kFailed, "Interrupted", absl::StrCat("received ", SignalName(sig))}, sig);
      return;
    case Stage::kDraining:
      SignalAll(sig, absl::StrCat("received ", SignalName(sig)));
      stage_ = Stage::kTerminating;
      kill_at_ = Clock::now() + options_.grace;
      return;
    case Stage::kTerminating:
      SignalAll(SIGKILL, absl::StrCat("received ", SignalName(sig), " again"));
      stage_ = Stage::kKilling;
      return;
    case Stage::kKilling:
      return;
  }
}

void JobRunner::AdvanceShutdown(Clock::time_point now) {
  if (stage_ == Stage::kDraining && now >= term_at_) {
    SignalAll(SIGTERM, absl::StrCat("still running after ", FormatSeconds(options_.grace)));
    stage_ = Stage::kTerminating;
    kill_at_ = now + options_.grace;
  }
  if (stage_ == Stage::kTerminating && now >= kill_at_ && AnyRunning()) {
    SignalAll(SIGKILL, absl::StrCat("still running after ", FormatSeconds(options_.grace)));
    stage_ = Stage::kKilling;
  }
}

void JobRunner::SignalAll(int sig, const std::string& why) {
  const std::vector<std::string> names = RunningNames();
  if (names.empty()) return;
  Log(absl::StrCat(why, ": sending ", SignalName(sig), " to ", absl::StrJoin(names, ", ")));
  for (Replica& r : replicas_) {
    if (!r.process) continue;
    if (absl::Status s = r.process->Signal(sig); !s.ok()) {
      Log(absl::StrCat("cannot signal ", r.name, ": ", s.message()));
    }
  }
}

std::vector<std::string> JobRunner::RunningNames() const {
  std::vector<std::string> names;
  for (const Replica& r : replicas_) {
    if (r.process) names.push_back(r.name);
  }
  return names;
}

bool JobRunner::AnyRunning() const {
  return std::any_of(replicas_.begin(), replicas_.end(),
                     [](const Replica& r) { return r.process != nullptr; });
}

std::vector<api::ReplicaState> JobRunner::States() const {
  std::vector<api::ReplicaState> states;
  states.reserve(replicas_.size());
  for (const Replica& r : replicas_) {
    states.push_back({r.type, r.index, r.phase, r.last_exit, r.name});
  }
  return states;
}

}  // namespace

absl::StatusOr<int> RunJob(const LaunchOptions& options, std::ostream& out, std::ostream& err) {
  JobRunner runner(options, out, err);
  return runner.Run();
}

}  // namespace kubetrain::launcher
