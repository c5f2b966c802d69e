#include "runtime/exchange/allreduce/rendezvous_server.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "runtime/exchange/allreduce/rendezvous_incomplete.h"
#include "runtime/exchange/grpc_util.h"

namespace kubetrain::allreduce {

RendezvousService::RendezvousService(RendezvousServerOptions options, const Clock& clock)
    : options_(std::move(options)), clock_(clock), ranks_(options_.names.size()) {}

void RendezvousService::Close() {
  absl::MutexLock l(&mu_);
  closed_ = true;
  cv_.SignalAll();
}

bool RendezvousService::AllKnowAbortLocked() const {
  for (size_t i = 0; i < ranks_.size(); ++i) {
    // Rank 0 is the caller; the lost rank is gone.
    if (i != 0 && static_cast<int>(i) != lost_rank_ && !ranks_[i].knows_abort) return false;
  }
  return true;
}

void RendezvousService::WaitUntilAbortIsKnown(double seconds) {
  absl::MutexLock l(&mu_);
  if (abort_reason_.empty()) return;
  const double deadline = clock_.NowSeconds() + seconds;
  while (!AllKnowAbortLocked() && clock_.NowSeconds() < deadline) {
    cv_.WaitWithTimeout(&mu_, absl::Milliseconds(50));
  }
}

void RendezvousService::FillWorld(v1::JoinResponse* resp) const {
  resp->set_generation(options_.generation);
  resp->set_nccl_unique_id(options_.nccl_unique_id);
  for (const RankState& r : ranks_) *resp->add_ranks() = r.info;
}

void RendezvousService::RecordAbort(int lost_rank, const std::string& reason) {
  if (!abort_reason_.empty()) return;
  abort_reason_ = reason;
  lost_rank_ = lost_rank;
  cv_.SignalAll();
}

std::string RendezvousService::MissingRanks() const {
  std::vector<std::string> missing;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (!ranks_[i].joined) missing.push_back(options_.names[i]);
  }
  return absl::StrJoin(missing, ", ");
}

void RendezvousService::CheckSilentRanks(double now) {
  if (!formed_ || !abort_reason_.empty()) return;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const double silent = now - ranks_[i].last_seen;
    if (silent > options_.peer_timeout_seconds) {
      const std::string& address = ranks_[i].info.data_address();
      RecordAbort(
          static_cast<int>(i),
          absl::StrCat("lost ", options_.names[i], " (rank ", i, address.empty() ? "" : ", ",
                       address, "): no heartbeat for ", static_cast<int64_t>(silent),
                       "s (peer timeout ", options_.peer_timeout_seconds, "s)"));
      return;
    }
  }
}

grpc::Status RendezvousService::Join(grpc::ServerContext* ctx, const v1::JoinRequest* req,
                                     v1::JoinResponse* resp) {
  if (grpc::Status s = exchange::CheckToken(*ctx, options_.token); !s.ok()) return s;
  const int world = static_cast<int>(options_.names.size());  // ranks_.size(), fixed
  if (req->world_size() != world || req->rank() < 0 || req->rank() >= world) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("rank ", req->rank(), " of world ", req->world_size(),
                                     " does not fit this job's world of ", world));
  }
  absl::MutexLock l(&mu_);
  RankState& r = ranks_[static_cast<size_t>(req->rank())];
  if (formed_) {
    if (r.info.incarnation() == req->incarnation()) {  // a retried Join
      FillWorld(resp);
      return grpc::Status::OK;
    }
    // The world formed with another process in this rank: it restarted, so
    // every rank must start over from the newest checkpoint.
    RecordAbort(req->rank(), absl::StrCat(options_.names[static_cast<size_t>(req->rank())],
                                          " restarted during training"));
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrCat("this rendezvous generation is over (", abort_reason_,
                                     "); join again once worker rank 0 restarts"));
  }
  const double now = clock_.NowSeconds();
  if (first_join_ < 0) first_join_ = now;
  r.joined = true;
  r.info.set_rank(req->rank());
  r.info.set_name(options_.names[static_cast<size_t>(req->rank())]);
  r.info.set_data_address(req->data_address());
  r.info.set_incarnation(req->incarnation());
  r.info.set_device_uuid(req->device_uuid());
  r.last_seen = now;
  if (std::all_of(ranks_.begin(), ranks_.end(), [](const RankState& s) { return s.joined; })) {
    formed_ = true;
    for (RankState& s : ranks_) s.last_seen = now;
    cv_.SignalAll();
  }
  const uint64_t incarnation = req->incarnation();
  while (!formed_ && !closed_ && !ctx->IsCancelled() && r.info.incarnation() == incarnation) {
    if (clock_.NowSeconds() - first_join_ > options_.join_timeout_seconds) {
      const std::string missing = MissingRanks();
      return exchange::ToGrpc(RendezvousIncompleteError(
          absl::StrCat("the allreduce world did not form within ", options_.join_timeout_seconds,
                       "s (--rendezvous-timeout); missing: ", missing),
          missing));
    }
    cv_.WaitWithTimeout(&mu_, absl::Milliseconds(200));
  }
  if (!formed_) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, closed_
                                                           ? "the rendezvous is shutting down"
                                                           : "this join was replaced or cancelled");
  }
  if (r.info.incarnation() != incarnation) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "replaced by a newer join of this rank");
  }
  FillWorld(resp);
  return grpc::Status::OK;
}

grpc::Status RendezvousService::Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                                          v1::HeartbeatResponse* resp) {
  if (grpc::Status s = exchange::CheckToken(*ctx, options_.token); !s.ok()) return s;
  absl::MutexLock l(&mu_);
  if (req->generation() != options_.generation) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "heartbeat for another rendezvous generation");
  }
  if (req->rank() < 0 || req->rank() >= static_cast<int>(ranks_.size())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "rank outside the world");
  }
  const double now = clock_.NowSeconds();
  RankState& r = ranks_[static_cast<size_t>(req->rank())];
  r.last_seen = now;
  r.started = std::max(r.started, req->collectives_started());
  r.finished = std::max(r.finished, req->collectives_finished());
  CheckSilentRanks(now);
  for (size_t i = 0; i < ranks_.size(); ++i) {
    v1::PeerProgress* p = resp->add_peers();
    p->set_rank(static_cast<int>(i));
    p->set_name(options_.names[i]);
    p->set_collectives_started(ranks_[i].started);
    p->set_seconds_since_heartbeat(now - ranks_[i].last_seen);
  }
  resp->set_abort_reason(abort_reason_);
  resp->set_lost_rank(abort_reason_.empty() ? -1 : lost_rank_);
  // Only the rank's own word that it stored the reason counts: an answer
  // carrying it may still be in flight when rank 0 would leave.
  if (req->knows_abort() && !abort_reason_.empty()) {
    r.knows_abort = true;
    cv_.SignalAll();
  }
  return grpc::Status::OK;
}

grpc::Status RendezvousService::Abort(grpc::ServerContext* ctx, const v1::AbortRequest* req,
                                      v1::AbortResponse* resp) {
  if (grpc::Status s = exchange::CheckToken(*ctx, options_.token); !s.ok()) return s;
  absl::MutexLock l(&mu_);
  if (req->generation() == options_.generation) RecordAbort(req->lost_rank(), req->reason());
  resp->set_abort_reason(abort_reason_);
  resp->set_lost_rank(lost_rank_);
  return grpc::Status::OK;
}

absl::StatusOr<std::unique_ptr<RendezvousServer>> RendezvousServer::Start(
    RendezvousServerOptions options, const Clock& clock) {
  if (options.names.empty()) return absl::InvalidArgumentError("rendezvous needs a world");
  std::unique_ptr<RendezvousServer> s(new RendezvousServer());
  const std::string address = options.listen_address;
  s->service_ = std::make_unique<RendezvousService>(std::move(options), clock);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &s->port_);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  builder.RegisterService(s->service_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("rendezvous: cannot listen on ", address));
  }
  return s;
}

RendezvousServer::~RendezvousServer() {
  if (service_ != nullptr) service_->Close();
  if (server_ != nullptr)
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

}  // namespace kubetrain::allreduce
