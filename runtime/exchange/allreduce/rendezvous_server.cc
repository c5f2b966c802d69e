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
    : options_(std::move(options)), clock_(clock) {
  absl::MutexLock l(&mu_);
  for (size_t i = 0; i < options_.names.size(); ++i) expected_.insert(static_cast<int>(i));
}

void RendezvousService::Close() {
  absl::MutexLock l(&mu_);
  closed_ = true;
  cv_.SignalAll();
}

uint64_t RendezvousService::generation_number() const {
  absl::MutexLock l(&mu_);
  return number_;
}

int RendezvousService::MaxIndex() const {
  return elastic() ? std::max(options_.max_world, static_cast<int>(options_.names.size()))
                   : static_cast<int>(options_.names.size());
}

std::string RendezvousService::NameOf(int index) const {
  if (index >= 0 && static_cast<size_t>(index) < options_.names.size()) {
    return options_.names[static_cast<size_t>(index)];
  }
  return absl::StrCat("worker-", index);
}

int RendezvousService::RankOfIndex(int index) const {
  for (size_t r = 0; r < world_.size(); ++r) {
    if (world_[r].info.index() == index) return static_cast<int>(r);
  }
  return -1;
}

bool RendezvousService::AllKnowAbortLocked() const {
  for (size_t i = 0; i < world_.size(); ++i) {
    // Rank 0 is the caller; the lost rank is gone.
    if (i != 0 && static_cast<int>(i) != lost_rank_ && !world_[i].knows_abort) return false;
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
  resp->set_generation(IdOf(number_));
  resp->set_generation_number(number_);
  resp->set_nccl_unique_id(nccl_id_);
  resp->set_state_rank(state_rank_);
  resp->set_change(change_);
  resp->set_joined(joined_);
  resp->set_left(left_);
  resp->set_lost(lost_);
  for (const Member& m : world_) *resp->add_ranks() = m.info;
}

void RendezvousService::RecordAbort(int lost_rank, const std::string& reason) {
  if (!abort_reason_.empty()) return;
  abort_reason_ = reason;
  lost_rank_ = lost_rank;
  cv_.SignalAll();
}

void RendezvousService::EndGeneration(int lost_rank, const std::string& reason, bool leaving) {
  if (!formed_) return;
  formed_ = false;
  abort_reason_ = reason;
  lost_rank_ = lost_rank;
  change_ = reason;
  forming_since_ = clock_.NowSeconds();
  expected_.clear();
  if (!elastic()) {
    for (int i = 0; i < MaxIndex(); ++i) expected_.insert(i);
  } else {
    for (size_t r = 0; r < world_.size(); ++r) {
      if (static_cast<int>(r) != lost_rank) expected_.insert(world_[r].info.index());
    }
  }
  if (lost_rank >= 0) ++(leaving ? left_since_ : lost_since_);
  cv_.SignalAll();
}

void RendezvousService::Lost(int rank, const std::string& reason) {
  if (options_.reform) {
    EndGeneration(rank, reason, /*leaving=*/false);
  } else {
    RecordAbort(rank, reason);
  }
}

std::string RendezvousService::MissingRanks() const {
  std::vector<std::string> missing;
  for (int i : expected_) {
    if (!pending_.contains(i)) missing.push_back(NameOf(i));
  }
  if (missing.empty() && elastic()) {
    missing.push_back(
        absl::StrCat(std::max<int>(0, options_.min_world - static_cast<int>(pending_.size())),
                     " more worker(s) to reach --min-workers ", options_.min_world));
  }
  return absl::StrJoin(missing, ", ");
}

void RendezvousService::TryForm(double now) {
  if (formed_ || closed_) return;
  if (elastic() && number_ > 0) {
    // Members of the last generation that did not come back within the
    // peer timeout are lost: form without them.
    if (now - forming_since_ > options_.peer_timeout_seconds) {
      for (auto it = expected_.begin(); it != expected_.end();) {
        if (pending_.contains(*it)) {
          ++it;
        } else {
          ++lost_since_;
          it = expected_.erase(it);
        }
      }
    }
  }
  for (int i : expected_) {
    if (!pending_.contains(i)) return;
  }
  if (elastic() && static_cast<int>(pending_.size()) < options_.min_world) return;
  if (pending_.empty()) return;
  std::vector<Member> world;
  uint64_t last = number_;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (elastic() && static_cast<int>(world.size()) >= options_.max_world) break;
    last = std::max(last, it->second.last_generation);
    world.push_back(std::move(it->second));
    it = pending_.erase(it);
  }
  number_ = last + 1;
  state_rank_ = 0;
  int64_t newest = -1;
  for (size_t r = 0; r < world.size(); ++r) {
    Member& m = world[r];
    m.info.set_rank(static_cast<int>(r));
    m.last_seen = now;
    m.started = m.finished = 0;
    m.knows_abort = false;
    if (m.info.state_step() > newest) {
      newest = m.info.state_step();
      state_rank_ = static_cast<int>(r);
    }
  }
  // What changed, for every rank's log: the reason the last generation
  // ended, then who joined and who is gone.
  std::set<int> before, after;
  for (const Member& m : world_) before.insert(m.info.index());
  for (const Member& m : world) after.insert(m.info.index());
  std::vector<std::string> joined, gone;
  for (int i : after) {
    if (number_ > 1 && !before.contains(i)) joined.push_back(NameOf(i));
  }
  for (int i : before) {
    if (!after.contains(i)) gone.push_back(NameOf(i));
  }
  joined_ = before.empty() ? 0 : static_cast<int>(joined.size());
  left_ = left_since_;
  lost_ = lost_since_ + (number_ > 1 && before.empty() ? 1 : 0);  // a new host: worker 0 was lost
  left_since_ = lost_since_ = 0;
  if (number_ == 1) {
    change_.clear();
  } else if (before.empty()) {
    change_ = absl::StrCat("lost ", NameOf(0),
                           " (the rendezvous host): it restarted and the survivors joined it");
  } else {
    if (!joined.empty()) absl::StrAppend(&change_, "; joined ", absl::StrJoin(joined, ", "));
    if (!gone.empty()) absl::StrAppend(&change_, "; without ", absl::StrJoin(gone, ", "));
  }
  world_ = std::move(world);
  nccl_id_ = number_ == 1 || !options_.new_nccl_unique_id ? options_.nccl_unique_id
                                                          : options_.new_nccl_unique_id();
  if (number_ > 1 && !options_.new_nccl_unique_id) nccl_id_.clear();
  abort_reason_.clear();
  lost_rank_ = -1;
  expected_.clear();
  formed_ = true;
  cv_.SignalAll();
}

void RendezvousService::CheckSilentRanks(double now) {
  if (!formed_ || !abort_reason_.empty()) return;
  for (size_t i = 0; i < world_.size(); ++i) {
    const double silent = now - world_[i].last_seen;
    if (silent > options_.peer_timeout_seconds) {
      const std::string& address = world_[i].info.data_address();
      Lost(static_cast<int>(i),
           absl::StrCat("lost ", world_[i].info.name(), " (rank ", i, address.empty() ? "" : ", ",
                        address, "): no heartbeat for ", static_cast<int64_t>(silent),
                        "s (peer timeout ", options_.peer_timeout_seconds, "s)"));
      return;
    }
  }
}

bool RendezvousService::InWorldLocked(int index, uint64_t incarnation) const {
  const int r = RankOfIndex(index);
  return formed_ && r >= 0 && world_[static_cast<size_t>(r)].info.incarnation() == incarnation;
}

bool RendezvousService::ReplacedLocked(int index, uint64_t incarnation) const {
  auto it = pending_.find(index);
  return !InWorldLocked(index, incarnation) &&
         (it == pending_.end() || it->second.info.incarnation() != incarnation);
}

grpc::Status RendezvousService::Join(grpc::ServerContext* ctx, const v1::JoinRequest* req,
                                     v1::JoinResponse* resp) {
  if (grpc::Status s = exchange::CheckToken(*ctx, options_.token); !s.ok()) return s;
  const int index = req->rank();
  const int fixed_world = static_cast<int>(options_.names.size());
  if (index < 0 || index >= MaxIndex() || (!elastic() && req->world_size() != fixed_world)) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        elastic() ? absl::StrCat("worker index ", index, " is outside this job's --max-workers ",
                                 options_.max_world)
                  : absl::StrCat("rank ", index, " of world ", req->world_size(),
                                 " does not fit this job's world of ", fixed_world));
  }
  absl::MutexLock l(&mu_);
  const double now = clock_.NowSeconds();
  const uint64_t incarnation = req->incarnation();
  if (formed_) {
    const int r = RankOfIndex(index);
    const bool same_process =
        r >= 0 && world_[static_cast<size_t>(r)].info.incarnation() == incarnation;
    if (same_process && req->last_generation() < number_) {  // a retried Join
      FillWorld(resp);
      return grpc::Status::OK;
    }
    if (!options_.reform) {
      if (r < 0) {
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            absl::StrCat(NameOf(index), " is not in this job's world"));
      }
      // The world formed with another process in this rank: it restarted, so
      // every rank must start over from the newest checkpoint.
      RecordAbort(r, absl::StrCat(NameOf(index), " restarted during training"));
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          absl::StrCat("this rendezvous generation is over (", abort_reason_,
                                       "); join again once worker rank 0 restarts"));
    }
    // The running generation ends: this replica restarted (its old process
    // is lost), a member saw the generation end, or a new replica joins.
    if (r < 0) {
      EndGeneration(-1, absl::StrCat("joined ", NameOf(index)), false);
    } else if (!same_process) {
      EndGeneration(r, absl::StrCat("lost ", NameOf(index), " (rank ", r, "): it restarted"),
                    false);
    } else {
      EndGeneration(-1, absl::StrCat(NameOf(index), " left the generation"), false);
    }
  }
  Member m;
  m.info.set_index(index);
  m.info.set_name(elastic() || index >= fixed_world
                      ? (req->name().empty() ? NameOf(index) : req->name())
                      : NameOf(index));
  m.info.set_data_address(req->data_address());
  m.info.set_incarnation(incarnation);
  m.info.set_device_uuid(req->device_uuid());
  m.info.set_state_step(req->state_step());
  m.last_generation = req->last_generation();
  m.last_seen = now;
  pending_[index] = std::move(m);
  if (forming_since_ < 0) forming_since_ = now;
  TryForm(now);
  while (!InWorldLocked(index, incarnation) && !closed_ && !ctx->IsCancelled() &&
         !ReplacedLocked(index, incarnation)) {
    if (clock_.NowSeconds() - forming_since_ > options_.join_timeout_seconds) {
      const std::string missing = MissingRanks();
      return exchange::ToGrpc(RendezvousIncompleteError(
          absl::StrCat("the allreduce world did not form within ", options_.join_timeout_seconds,
                       "s (--rendezvous-timeout); missing: ", missing),
          missing));
    }
    cv_.WaitWithTimeout(&mu_, absl::Milliseconds(200));
    TryForm(clock_.NowSeconds());
  }
  if (!InWorldLocked(index, incarnation)) {
    // Still waiting when its call ended: a retry of this process finds its
    // place kept (same incarnation) until the world forms.
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, closed_
                                                           ? "the rendezvous is shutting down"
                                                           : "this join was replaced or cancelled");
  }
  FillWorld(resp);
  return grpc::Status::OK;
}

grpc::Status RendezvousService::Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                                          v1::HeartbeatResponse* resp) {
  if (grpc::Status s = exchange::CheckToken(*ctx, options_.token); !s.ok()) return s;
  absl::MutexLock l(&mu_);
  if (number_ == 0 || req->generation() != IdOf(number_)) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "heartbeat for another rendezvous generation");
  }
  if (req->rank() < 0 || req->rank() >= static_cast<int>(world_.size())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "rank outside the world");
  }
  const double now = clock_.NowSeconds();
  Member& r = world_[static_cast<size_t>(req->rank())];
  r.last_seen = now;
  r.started = std::max(r.started, req->collectives_started());
  r.finished = std::max(r.finished, req->collectives_finished());
  CheckSilentRanks(now);
  for (size_t i = 0; i < world_.size(); ++i) {
    v1::PeerProgress* p = resp->add_peers();
    p->set_rank(static_cast<int>(i));
    p->set_name(world_[i].info.name());
    p->set_collectives_started(world_[i].started);
    p->set_seconds_since_heartbeat(now - world_[i].last_seen);
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
  if (number_ > 0 && req->generation() == IdOf(number_)) {
    if (options_.reform && req->leaving() && req->rank() >= 0 &&
        req->rank() < static_cast<int>(world_.size())) {
      const std::string& name = world_[static_cast<size_t>(req->rank())].info.name();
      if (formed_) {
        EndGeneration(req->rank(), absl::StrCat("left ", name, ": ", req->reason()), true);
      } else {
        expected_.erase(world_[static_cast<size_t>(req->rank())].info.index());
        TryForm(clock_.NowSeconds());
      }
    } else {
      Lost(req->lost_rank(), req->reason());
    }
  }
  resp->set_abort_reason(abort_reason_);
  resp->set_lost_rank(lost_rank_);
  return grpc::Status::OK;
}

absl::StatusOr<std::unique_ptr<RendezvousServer>> RendezvousServer::Start(
    RendezvousServerOptions options, const Clock& clock) {
  if (options.names.empty()) return absl::InvalidArgumentError("rendezvous needs a world");
  if (options.max_world > 0 && (options.min_world < 1 || options.min_world > options.max_world)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "elastic world needs 1 <= min (", options.min_world, ") <= max (", options.max_world, ")"));
  }
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
