#include "runtime/exchange/ps/ps_exchange.h"

#include <algorithm>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "runtime/exchange/ps/grpc_step_transport.h"
#include "runtime/exchange/ps/tcp_step_transport.h"

namespace kubetrain::ps {
namespace {

// Sleeps between attempts: 100 ms doubling to 2 s.
class Backoff {
 public:
  void Wait() {
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
    delay_ms_ = std::min(delay_ms_ * 2, 2000);
  }

 private:
  int delay_ms_ = 100;
};

// While a shard is lost, how often the worker says it still waits.
constexpr double kWaitingLogSeconds = 10;

}  // namespace

PsExchange::PsExchange(PsExchangeOptions options, const Clock& clock, Logger log)
    : opt_(std::move(options)), clock_(clock), log_(std::move(log)) {
  for (size_t i = 0; i < opt_.ps_addresses.size(); ++i) {
    Shard s;
    s.client =
        std::make_unique<ShardClient>(absl::StrCat("ps-", i), opt_.ps_addresses[i], opt_.token);
    // The step transports, in order of preference: the direct TCP data plane
    // (when allowed; it carries steps once the shard offers it), then the
    // gRPC stream every shard serves.
    if (opt_.data_plane) s.transports.push_back(std::make_unique<TcpStepTransport>(*s.client));
    s.transports.push_back(std::make_unique<GrpcStepTransport>(*s.client));
    shards_.push_back(std::move(s));
  }
}

PsExchange::~PsExchange() = default;

void PsExchange::Log(const std::string& line) {
  absl::MutexLock lock(&log_mu_);
  log_(line);
}

std::optional<StepTransportKind> PsExchange::transport(int shard) const {
  const StepTransport* t = shards_.at(static_cast<size_t>(shard)).chosen;
  if (t == nullptr) return std::nullopt;
  return t->kind();
}

StepTransport& PsExchange::ChooseTransport(Shard& s) {
  for (const std::unique_ptr<StepTransport>& t : s.transports) {
    if (!t->CanCarry(opt_.wire_dtype)) continue;
    if (t.get() != s.chosen) {
      Log(absl::StrCat(s.client->name(), ": exchanging over ", t->Describe(),
                       s.chosen != nullptr ? " instead" : ""));
      if (s.chosen != nullptr) s.chosen->Close();
      s.chosen = t.get();
    }
    return *t;
  }
  KT_CHECK(false) << "the gRPC step transport carries every step";
  return *s.transports.back();
}

absl::Status PsExchange::RegisterShard(Shard& s, std::span<float> params, int64_t clock) {
  v1::RegisterRequest req;
  req.set_worker(opt_.worker);
  req.set_num_params(static_cast<uint64_t>(num_params_));
  req.set_worker_name(opt_.worker_name);
  req.set_clock(clock);
  // Each attempt waits for the channel a bounded time, well inside the peer
  // timeout, so the caller's backoff and timeout stay in charge.
  const auto attempt = std::chrono::milliseconds(
      static_cast<int64_t>(std::clamp(opt_.peer_timeout_seconds / 4, 0.2, 5.0) * 1000));
  absl::StatusOr<v1::RegisterResponse> r = s.client->Register(req, attempt);
  if (!r.ok()) return r.status();
  if (r->mode() != opt_.mode.ToString()) {
    return absl::FailedPreconditionError(absl::StrCat(s.client->name(), " runs mode ", r->mode(),
                                                      " but this worker runs ",
                                                      opt_.mode.ToString()));
  }
  const Range want = ShardRange(num_params_, static_cast<int>(shards_.size()), r->shard_index());
  if (r->num_shards() != static_cast<int>(shards_.size()) ||
      static_cast<int64_t>(r->range().offset()) != want.offset ||
      static_cast<int64_t>(r->range().length()) != want.length) {
    return absl::FailedPreconditionError(
        absl::StrCat(s.client->name(), " is shard ", r->shard_index(), " of ", r->num_shards(),
                     " but this worker knows ", shards_.size(), " parameter servers"));
  }
  s.range = want;
  const bool restarted = s.last_incarnation != 0 && s.last_incarnation != r->incarnation();
  if (!r->initialized() && (opt_.initializer || started_)) {
    // Empty: at the job's start the initialiser gives the first parameters;
    // a shard that restarted without a checkpoint gets the values this
    // worker last pulled for it (every worker may: the shard keeps the
    // first and ignores the rest). Its optimizer state is lost.
    v1::PushHeader h;
    h.set_worker(opt_.worker);
    // The shard's global step: sync, this worker's clock; async/ssp, the
    // shard's last step this worker saw (every worker's updates).
    h.set_step(opt_.mode.kind == ExchangeMode::kSync ? clock : std::max(clock, s.global_step));
    h.set_incarnation(r->incarnation());
    h.set_total_steps(opt_.total_steps);
    absl::StatusOr<v1::PushResponse> init = s.client->Initialize(
        h, params.subspan(static_cast<size_t>(want.offset), static_cast<size_t>(want.length)),
        want.offset, opt_.wire_dtype);
    if (!init.ok()) return init.status();
    if (init->accepted() && !restarted) {
      Log(absl::StrCat("initialised ", s.client->name(), " (", want.length, " parameters at step ",
                       clock, ")"));
    }
    // Whoever won, the step the shard starts at is the winner's: ask again.
    r = s.client->Register(req, attempt);
    if (!r.ok()) return r.status();
  }
  for (const std::unique_ptr<StepTransport>& t : s.transports) t->Offer(*r);
  s.global_step = r->global_step();
  s.resume_clock = r->worker_clock();
  if (restarted) {
    Log(absl::StrCat(
        s.client->name(), " restarted: ",
        !r->initialized() ? "came back empty; waiting for a worker to re-initialise it"
        : r->restored_from_checkpoint()
            ? absl::StrCat("resumed from its checkpoint at step ", r->global_step())
            : absl::StrCat("re-initialised from ", r->initialized_by(), "'s parameters at step ",
                           r->global_step(), " (its optimizer state is lost)")));
  }
  s.incarnation = r->incarnation();
  if (s.last_incarnation != 0 && s.last_incarnation != s.incarnation && opt_.metrics != nullptr) {
    opt_.metrics->AddPeerRestart(metrics::PeerRole::kPs);
  }
  s.last_incarnation = s.incarnation;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PsExchange::ShardStep(Shard& s, int64_t clock, std::span<const float> grads,
                                              std::span<float> params, bool push) {
  double lost_since = -1;
  // While this shard is unreachable it counts as a stalled peer.
  struct LostGuard {
    PsExchange* self;
    bool lost = false;
    void Set() {
      if (lost) return;
      lost = true;
      if (self->opt_.metrics != nullptr) self->opt_.metrics->SetStalledPeers(++self->lost_shards_);
    }
    ~LostGuard() {
      if (lost && self->opt_.metrics != nullptr) {
        self->opt_.metrics->SetStalledPeers(--self->lost_shards_);
      }
    }
  } lost_guard{this};
  const int64_t bytes_per_value = opt_.wire_dtype == v1::WIRE_DTYPE_F16 ? 2 : 4;
  Backoff backoff;
  int64_t resume = clock;  // the clock this step is for
  bool skip_push = !push;
  double waiting_logged = -1;    // when "waiting for ... to come back" was last logged
  bool restarted_shard = false;  // the last failure said the shard restarted
  while (true) {
    absl::Status st;
    if (s.incarnation == 0) {
      const uint64_t before = s.last_incarnation;
      st = RegisterShard(s, params, clock);
      if (st.ok() && !push) {
        // Start: continue where the shard says this worker is (sync: its
        // global step; async/ssp: this worker's clock there, or the
        // slowest member's for a worker that joins).
        resume = s.resume_clock;
      } else if (st.ok() && push && s.resume_clock != clock) {
        // The shard moved (restarted from a checkpoint): continue from its
        // clock instead of pushing a gradient for a step it does not expect.
        Log(absl::StrCat(s.client->name(), " is back at step ", s.resume_clock,
                         "; resuming there (was at ", clock, ")"));
        resume = s.resume_clock;
        skip_push = true;
      } else if (st.ok() && push && s.incarnation != before) {
        // A new incarnation at this very step (restarted fresh, or from a
        // checkpoint of this step) never saw this step's gradient, even if
        // the one before committed it: push it again, or a sync barrier
        // would wait for it forever.
        resume = clock;
        skip_push = false;
      }
    }
    if (st.ok() && !skip_push) {
      // Push and pull in one round trip on the chosen transport.
      StepTransport& transport = ChooseTransport(s);
      v1::PushHeader h;
      h.set_worker(opt_.worker);
      h.set_step(clock);
      h.set_incarnation(s.incarnation);
      v1::PullRequest req;
      req.set_worker(opt_.worker);
      req.set_incarnation(s.incarnation);
      req.set_dtype(opt_.wire_dtype);
      req.set_min_step(opt_.mode.kind == ExchangeMode::kSync ? clock + 1 : 0);
      req.set_clock(clock + 1);
      const double t0 = clock_.NowSeconds();
      double t1 = t0;
      bool pushed = false;
      absl::StatusOr<PullReply> r = transport.Step(
          h,
          grads.subspan(static_cast<size_t>(s.range.offset), static_cast<size_t>(s.range.length)),
          req,
          params.subspan(static_cast<size_t>(s.range.offset), static_cast<size_t>(s.range.length)),
          s.range.offset, opt_.wire_dtype, &pushed, [&] { t1 = clock_.NowSeconds(); });
      if (pushed) {
        skip_push = true;  // a retry only pulls
        resume = clock + 1;
      }
      if (r.ok()) {
        if (opt_.metrics != nullptr) {
          const int64_t bytes = s.range.length * bytes_per_value;
          opt_.metrics->RecordExchange(metrics::ExchangeOp::kPush, metrics::PeerRole::kPs, t1 - t0,
                                       bytes, 0);
          opt_.metrics->RecordExchange(metrics::ExchangeOp::kPull, metrics::PeerRole::kPs,
                                       clock_.NowSeconds() - t1, 0, bytes);
        }
        if (lost_since >= 0) Log(absl::StrCat("reconnected to ", s.client->name()));
        s.global_step = r->global_step;
        return opt_.mode.kind == ExchangeMode::kSync ? std::max(resume, r->global_step) : resume;
      }
      if (!pushed && !transport.CanCarry(opt_.wire_dtype)) {
        // The transport gave itself up (its port unreachable): the next in
        // the list carries the step, at once.
        Log(std::string(r.status().message()));
        continue;
      }
      st = r.status();
    }
    if (st.ok()) {
      // Only a pull: the first parameters, a resumed step, or a retry after
      // the push was committed.
      v1::PullRequest req;
      req.set_worker(opt_.worker);
      req.set_incarnation(s.incarnation);
      req.set_dtype(opt_.wire_dtype);
      req.set_min_step(opt_.mode.kind == ExchangeMode::kSync ? resume : 0);
      req.set_clock(resume);
      const double t0 = clock_.NowSeconds();
      absl::StatusOr<PullReply> r = s.client->Pull(
          req,
          params.subspan(static_cast<size_t>(s.range.offset), static_cast<size_t>(s.range.length)),
          s.range.offset);
      st = r.status();
      if (r.ok() && opt_.metrics != nullptr) {
        opt_.metrics->RecordExchange(metrics::ExchangeOp::kPull, metrics::PeerRole::kPs,
                                     clock_.NowSeconds() - t0, 0, s.range.length * bytes_per_value);
      }
      if (r.ok()) {
        if (lost_since >= 0) Log(absl::StrCat("reconnected to ", s.client->name()));
        s.global_step = r->global_step;
        // Sync: the barrier released at the shard's global step.
        return opt_.mode.kind == ExchangeMode::kSync ? std::max(resume, r->global_step) : resume;
      }
    }
    const StepError error = StepErrorOf(st);
    if (leaving_.load()) {
      // This worker leaves: no waiting for a shard to come back.
      return absl::Status(st.code(), absl::StrCat(s.client->name(), " (", s.client->address(),
                                                  "), while leaving: ", st.message()));
    }
    if (error == StepError::kShardRestarted) {
      Log(absl::StrCat(s.client->name(), ": ", st.message()));
      s.incarnation = 0;
      continue;
    }
    if (error == StepError::kUninitialised) {
      s.incarnation = 0;  // the shard lost its parameters; register to re-initialise
      restarted_shard = true;
    } else if (error == StepError::kRefused) {
      return absl::Status(st.code(), absl::StrCat(s.client->name(), " (", s.client->address(),
                                                  "): ", st.message()));
    }
    const double now = clock_.NowSeconds();
    if (lost_since < 0) {
      lost_since = now;
      lost_guard.Set();
      Log(absl::StrCat("lost ", s.client->name(), " (", s.client->address(), "): ", st.message(),
                       "; reconnecting"));
    }
    if (waiting_logged < 0) {
      waiting_logged = now;
    } else if (now - waiting_logged >= kWaitingLogSeconds) {
      waiting_logged = now;
      Log(absl::StrCat("waiting for ", s.client->name(), " to come back (",
                       restarted_shard ? "restarted shard" : "unreachable", ", ",
                       static_cast<int64_t>(now - lost_since), "s of --peer-timeout ",
                       opt_.peer_timeout_seconds, "s): ", st.message()));
    }
    if (now - lost_since > opt_.peer_timeout_seconds) {
      return absl::UnavailableError(absl::StrCat("lost parameter server ", s.client->name(), " (",
                                                 s.client->address(), ") for more than ",
                                                 opt_.peer_timeout_seconds, "s: ", st.message()));
    }
    backoff.Wait();
    s.incarnation = 0;  // re-register after reconnecting: it may have restarted
  }
}

absl::StatusOr<int64_t> PsExchange::ForAllShards(
    const std::function<absl::StatusOr<int64_t>(Shard&)>& fn) {
  std::vector<absl::StatusOr<int64_t>> results(shards_.size(), int64_t{0});
  std::vector<std::thread> threads;
  for (size_t i = 1; i < shards_.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = fn(shards_[i]); });
  }
  if (!shards_.empty()) results[0] = fn(shards_[0]);
  for (std::thread& t : threads) t.join();
  int64_t next = INT64_MAX;
  for (const auto& r : results) {
    if (!r.ok()) return r.status();
    next = std::min(next, *r);
  }
  for (const Shard& s : shards_) global_step_ = std::max(global_step_, s.global_step);
  return next == INT64_MAX ? 0 : next;
}

absl::StatusOr<int64_t> PsExchange::Start(std::span<float> params) {
  if (shards_.empty()) return absl::InvalidArgumentError("no parameter servers given");
  num_params_ = static_cast<int64_t>(params.size());
  absl::StatusOr<int64_t> next = ForAllShards([&](Shard& s) -> absl::StatusOr<int64_t> {
    // Register, initialise if needed, then fetch the current parameters.
    return ShardStep(s, 0, {}, params, /*push=*/false);
  });
  if (next.ok()) started_ = true;
  return next;
}

void PsExchange::Leave(const std::string& reason) {
  leaving_.store(true);
  for (Shard& s : shards_) {
    absl::StatusOr<v1::DoneResponse> r =
        s.client->Leave(opt_.worker, reason, std::chrono::seconds(5));
    if (!r.ok()) {
      Log(absl::StrCat("could not tell ", s.client->name(),
                       " this worker leaves: ", r.status().message()));
    }
  }
  Log(absl::StrCat(opt_.worker_name, " left the job: ", reason));
}

absl::StatusOr<int64_t> PsExchange::Step(int64_t step, std::span<const float> grads,
                                         std::span<float> params) {
  if (grads.size() != params.size() || static_cast<int64_t>(params.size()) != num_params_) {
    return absl::InvalidArgumentError("gradient and parameter sizes differ from the model's");
  }
  return ForAllShards([&](Shard& s) { return ShardStep(s, step, grads, params, /*push=*/true); });
}

absl::Status PsExchange::Finish() {
  for (Shard& s : shards_) {
    for (const std::unique_ptr<StepTransport>& t : s.transports) t->Close();
    absl::StatusOr<v1::DoneResponse> r = s.client->Done(opt_.worker, std::chrono::seconds(10));
    if (!r.ok()) {
      Log(absl::StrCat("could not tell ", s.client->name(),
                       " this worker finished: ", r.status().message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace kubetrain::ps
