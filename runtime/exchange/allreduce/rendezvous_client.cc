#include "runtime/exchange/allreduce/rendezvous_client.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "runtime/exchange/allreduce/rendezvous_incomplete.h"
#include "runtime/exchange/grpc_util.h"

namespace kubetrain::allreduce {
namespace {

std::chrono::system_clock::time_point In(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::milliseconds(static_cast<int64_t>(std::max(seconds, 0.001) * 1000));
}

}  // namespace

RendezvousClient::RendezvousClient(RendezvousClientOptions options, const Clock& clock,
                                   std::function<void(const std::string&)> log)
    : options_(std::move(options)),
      clock_(clock),
      log_(std::move(log)),
      channel_(exchange::MakeRuntimeChannel(options_.address)),
      stub_(v1::Rendezvous::NewStub(channel_)) {}

RendezvousClient::~RendezvousClient() { StopHeartbeats(); }

absl::StatusOr<v1::JoinResponse> RendezvousClient::Join(int64_t state_step,
                                                        uint64_t last_generation) {
  // Rank 0 owns the join timeout and answers with the missing ranks' names;
  // the client waits a little longer so that answer reaches it.
  constexpr double kGraceSeconds = 5;
  const double deadline = clock_.NowSeconds() + options_.join_timeout_seconds + kGraceSeconds;
  v1::JoinRequest req;
  req.set_rank(options_.rank);
  req.set_world_size(options_.world_size);
  req.set_name(options_.name);
  req.set_data_address(options_.data_address);
  req.set_device_uuid(options_.device_uuid);
  req.set_incarnation(options_.incarnation);
  req.set_state_step(state_step);
  req.set_last_generation(last_generation);
  std::string last_error;
  double last_log = clock_.NowSeconds();
  while (true) {
    const double left = deadline - clock_.NowSeconds();
    if (left <= 0) {
      return absl::UnavailableError(absl::StrCat(
          "rendezvous with ", options_.rank0_name, " at ", options_.address,
          " did not complete within ", options_.join_timeout_seconds,
          "s (--rendezvous-timeout): ", last_error.empty() ? "no answer" : last_error));
    }
    grpc::ClientContext ctx;
    exchange::AddToken(&ctx, options_.token);
    ctx.set_wait_for_ready(true);
    ctx.set_deadline(In(std::min(left, 5.0)));
    {
      absl::MutexLock l(&mu_);
      if (!cancel_joins_reason_.empty()) {
        return absl::CancelledError(
            absl::StrCat(options_.name, " joins no other generation: ", cancel_joins_reason_));
      }
      join_call_ = &ctx;
    }
    v1::JoinResponse resp;
    grpc::Status s = stub_->Join(&ctx, req, &resp);
    {
      absl::MutexLock l(&mu_);
      join_call_ = nullptr;
    }
    if (s.ok()) return resp;
    const absl::Status as = exchange::FromGrpc(s);
    switch (s.error_code()) {
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        // The server's own deadline (typed, naming the missing ranks); a
        // client-side one is just this attempt's slice.
        if (IsRendezvousIncomplete(as)) return absl::UnavailableError(as.message());
        break;
      case grpc::StatusCode::UNAUTHENTICATED:
      case grpc::StatusCode::INVALID_ARGUMENT:
        return absl::InvalidArgumentError(
            absl::StrCat("rendezvous refused this rank: ", as.message()));
      default:
        break;
    }
    if (s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) last_error = s.error_message();
    if (clock_.NowSeconds() - last_log >= 10) {
      log_(absl::StrCat("waiting for the allreduce rendezvous at ", options_.address, " (",
                        last_error.empty() ? "other ranks are still joining" : last_error, ")"));
      last_log = clock_.NowSeconds();
    }
    if (s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      absl::MutexLock l(&mu_);
      // Retry backoff; CancelJoins wakes it.
      if (cancel_joins_reason_.empty()) cv_.WaitWithTimeout(&mu_, absl::Milliseconds(200));
    }
  }
}

void RendezvousClient::StartHeartbeats(uint64_t generation, int rank) {
  absl::MutexLock l(&mu_);
  generation_ = generation;
  rank_ = rank >= 0 ? rank : options_.rank;
  stop_ = false;
  abort_reason_ = left_reason_;  // a rank that left stays out of every generation
  lost_rank_ = -1;
  abort_confirmed_ = false;
  peers_.clear();
  heartbeat_ = std::thread([this, generation, r = rank_] { HeartbeatLoop(generation, r); });
}

void RendezvousClient::StopHeartbeats() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
    cv_.SignalAll();
  }
  if (heartbeat_.joinable()) heartbeat_.join();
}

void RendezvousClient::SetAbort(int lost_rank, const std::string& reason) {
  absl::MutexLock l(&mu_);
  if (!abort_reason_.empty()) return;
  abort_reason_ = reason;
  lost_rank_ = lost_rank;
  cv_.SignalAll();  // the heartbeat thread confirms it to rank 0 now
}

bool RendezvousClient::HeartbeatDueLocked() const {
  return stop_ || (!abort_reason_.empty() && !abort_confirmed_);
}

void RendezvousClient::HeartbeatLoop(uint64_t generation, int rank) {
  double last_answer = clock_.NowSeconds();
  while (true) {
    {
      absl::MutexLock l(&mu_);
      if (stop_) return;
    }
    v1::HeartbeatRequest req;
    req.set_rank(rank);
    req.set_generation(generation);
    req.set_collectives_started(started_);
    req.set_collectives_finished(finished_);
    req.set_knows_abort(!AbortStatus().ok());
    grpc::ClientContext ctx;
    exchange::AddToken(&ctx, options_.token);
    ctx.set_deadline(In(std::max(options_.heartbeat_seconds * 2, 1.0)));
    v1::HeartbeatResponse resp;
    grpc::Status s = stub_->Heartbeat(&ctx, req, &resp);
    const double now = clock_.NowSeconds();
    if (s.ok()) {
      last_answer = now;
      if (req.knows_abort()) {
        absl::MutexLock l(&mu_);
        abort_confirmed_ = true;
      }
      std::vector<PeerView> peers;
      for (const v1::PeerProgress& p : resp.peers()) {
        peers.push_back({p.rank(), p.name(), p.collectives_started(), p.seconds_since_heartbeat()});
      }
      {
        absl::MutexLock l(&mu_);
        peers_ = std::move(peers);
      }
      if (!resp.abort_reason().empty() && !req.knows_abort()) {
        SetAbort(resp.lost_rank(), resp.abort_reason());
        continue;  // confirm it to rank 0 at once
      }
    } else if (now - last_answer > options_.peer_timeout_seconds) {
      SetAbort(0, absl::StrCat("lost ", options_.rank0_name, " (rank 0, the rendezvous host): no ",
                               "answer for ", static_cast<int64_t>(now - last_answer),
                               "s: ", s.error_message()));
    }
    absl::MutexLock l(&mu_);
    // The next heartbeat after the interval, or at once when one is due.
    const absl::Time until =
        absl::Now() +
        absl::Milliseconds(static_cast<int64_t>(std::max(options_.heartbeat_seconds, 0.01) * 1000));
    while (!HeartbeatDueLocked()) {
      if (cv_.WaitWithDeadline(&mu_, until)) break;  // the interval is over
    }
    if (stop_) return;
  }
}

std::vector<PeerView> RendezvousClient::Peers() const {
  absl::MutexLock l(&mu_);
  return peers_;
}

absl::Status RendezvousClient::AbortStatus() const {
  absl::MutexLock l(&mu_);
  if (abort_reason_.empty()) return absl::OkStatus();
  return absl::AbortedError(abort_reason_);
}

int RendezvousClient::lost_rank() const {
  absl::MutexLock l(&mu_);
  return lost_rank_;
}

grpc::Status RendezvousClient::SendAbort(int lost_rank, const std::string& reason, bool leaving,
                                         int* rank, v1::AbortResponse* resp) {
  v1::AbortRequest req;
  {
    absl::MutexLock l(&mu_);
    req.set_generation(generation_);
    *rank = rank_;
  }
  req.set_rank(*rank);
  req.set_lost_rank(leaving ? *rank : lost_rank);
  req.set_reason(reason);
  req.set_leaving(leaving);
  grpc::ClientContext ctx;
  exchange::AddToken(&ctx, options_.token);
  ctx.set_deadline(In(2));
  return stub_->Abort(&ctx, req, resp);
}

absl::Status RendezvousClient::ReportAbort(int lost_rank, const std::string& reason) {
  if (absl::Status s = AbortStatus(); !s.ok()) return s;
  int rank;
  v1::AbortResponse resp;
  grpc::Status s = SendAbort(lost_rank, reason, /*leaving=*/false, &rank, &resp);
  if (s.ok() && !resp.abort_reason().empty()) {
    SetAbort(resp.lost_rank(), resp.abort_reason());
  } else if (!s.ok() && rank != 0) {
    // Rank 0 does not answer: it is the peer that is gone.
    SetAbort(0, absl::StrCat("lost ", options_.rank0_name,
                             " (rank 0, the rendezvous host): ", s.error_message()));
  } else {
    SetAbort(lost_rank, reason);
  }
  return AbortStatus();
}

void RendezvousClient::CancelJoins(const std::string& reason) {
  absl::MutexLock l(&mu_);
  if (cancel_joins_reason_.empty()) cancel_joins_reason_ = reason;
  if (join_call_ != nullptr) join_call_->TryCancel();
  cv_.SignalAll();
}

void RendezvousClient::Leave(const std::string& reason) {
  CancelJoins(reason);
  {
    absl::MutexLock l(&mu_);
    if (left_reason_.empty()) left_reason_ = absl::StrCat(options_.name, " leaves: ", reason);
  }
  int rank;
  v1::AbortResponse resp;
  grpc::Status s = SendAbort(-1, reason, /*leaving=*/true, &rank, &resp);
  if (!s.ok()) {
    log_(absl::StrCat("could not tell the rendezvous that this rank leaves: ", s.error_message()));
  }
  SetAbort(rank, absl::StrCat(options_.name, " leaves: ", reason));
}

}  // namespace kubetrain::allreduce
