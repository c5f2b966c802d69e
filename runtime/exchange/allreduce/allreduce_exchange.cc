#include "runtime/exchange/allreduce/allreduce_exchange.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/exchange/allreduce/collective_backend.h"
#include "runtime/exchange/allreduce/ring_allreduce.h"
#include "runtime/exchange/allreduce/ring_handshake.h"
#include "runtime/exchange/checkpoint.h"
#include "runtime/tensor/denormals.h"

namespace kubetrain::allreduce {
namespace {

constexpr double kHandshakeSeconds = 5;

uint64_t NewIncarnation() {
  std::random_device rd;
  return (uint64_t{rd()} << 32 | rd()) | 1;
}

int Mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace

AllreduceExchange::AllreduceExchange(AllreduceExchangeOptions options, train::LrSchedule schedule,
                                     const Clock& clock,
                                     std::function<void(const std::string&)> log)
    : options_(std::move(options)),
      schedule_(std::move(schedule)),
      clock_(clock),
      log_(std::move(log)),
      incarnation_(NewIncarnation()) {}

AllreduceExchange::~AllreduceExchange() {
  // Rank 0 hosts the rendezvous: after a lost peer it stays until the other
  // ranks have the job-wide reason, or they would blame rank 0's exit.
  if (server_ != nullptr && client_ != nullptr && !client_->AbortStatus().ok()) {
    server_->WaitUntilAbortIsKnown(std::min(5.0, options_.peer_timeout_seconds));
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (collective_ != nullptr) collective_->Shutdown();
  if (comm_.joinable()) comm_.join();
  if (client_ != nullptr) client_->StopHeartbeats();
}

void AllreduceExchange::Leave(const std::string& reason) {
  {
    std::lock_guard<std::mutex> l(joined_mu_);
    if (!joined_) return;
  }
  client_->ReportAbort(options_.rank, reason).IgnoreError();  // Aborted: the reason stands
  if (server_ != nullptr) {
    server_->WaitUntilAbortIsKnown(std::min(5.0, options_.peer_timeout_seconds));
  }
}

std::string AllreduceExchange::name() const {
  return absl::StrCat("allreduce-", backend_.empty() ? options_.backend : backend_);
}

absl::StatusOr<int64_t> AllreduceExchange::Start(std::span<float> params) {
  const int world = world_size();
  const int rank = options_.rank;
  if (world < 1 || rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " outside a world of ", world));
  }
  absl::StatusOr<std::string> backend =
      ChooseCollectiveBackend(options_.backend, options_.tensors_on_gpu);
  if (!backend.ok()) return backend.status();
  backend_ = *backend;
  absl::StatusOr<std::unique_ptr<train::Optimizer>> opt =
      train::MakeOptimizer(options_.optimizer, params.size());
  if (!opt.ok()) return opt.status();
  optimizer_ = *std::move(opt);

  // The data-plane listener exists before this rank joins, so every peer
  // that learns its address can connect.
  absl::StatusOr<exchange::TcpListener> listener =
      exchange::TcpListener::Listen(options_.data_listen_host, 0);
  if (!listener.ok()) return listener.status();
  std::string rendezvous = options_.rendezvous_address;
  if (rank == 0) {
    RendezvousServerOptions so;
    so.listen_address = options_.rendezvous_listen_address;
    so.names = options_.names;
    so.token = options_.token;
    so.generation = incarnation_;
    so.join_timeout_seconds = options_.rendezvous_timeout_seconds;
    so.peer_timeout_seconds = options_.peer_timeout_seconds;
    if (backend_ == "nccl" && world > 1) {
      absl::StatusOr<std::string> id = NewNcclUniqueId();
      if (!id.ok()) return id.status();
      so.nccl_unique_id = *id;
    }
    absl::StatusOr<std::unique_ptr<RendezvousServer>> server =
        RendezvousServer::Start(std::move(so), clock_);
    if (!server.ok()) return server.status();
    server_ = *std::move(server);
    rendezvous = absl::StrCat("127.0.0.1:", server_->port());
  }
  RendezvousClientOptions co;
  co.address = rendezvous;
  co.token = options_.token;
  co.rank = rank;
  co.world_size = world;
  co.name = options_.names[static_cast<size_t>(rank)];
  co.rank0_name = options_.names[0];
  co.data_address = absl::StrCat(options_.data_advertise_host, ":", listener->port());
  co.incarnation = incarnation_;
  co.join_timeout_seconds = options_.rendezvous_timeout_seconds;
  co.peer_timeout_seconds = options_.peer_timeout_seconds;
  co.heartbeat_seconds = options_.heartbeat_seconds;
  client_ = std::make_unique<RendezvousClient>(co, clock_, log_);
  log_(absl::StrCat(co.name, ": joining the allreduce rendezvous at ",
                    rank == 0 ? absl::StrCat("port ", server_->port()) : rendezvous, " (rank ",
                    rank, " of ", world, ", backend ", backend_, ")"));
  absl::StatusOr<v1::JoinResponse> joined = client_->Join();
  if (!joined.ok()) return joined.status();
  if (joined->ranks_size() != world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the rendezvous answered a world of ", joined->ranks_size(), " ranks, expected ", world));
  }
  client_->StartHeartbeats(joined->generation());
  {
    std::lock_guard<std::mutex> l(joined_mu_);
    joined_ = true;
  }

  if (backend_ == "nccl") {
    absl::StatusOr<std::unique_ptr<Collective>> c =
        MakeNcclCollective(rank, world, joined->nccl_unique_id(), options_.gpu_device);
    if (!c.ok()) return c.status();
    collective_ = *std::move(c);
  } else {
    // Ring links: dial the right neighbour, then take the left one's call.
    exchange::TcpConnection right, left;
    if (world > 1) {
      auto abort_check = [this] { return client_->AbortStatus(); };
      const v1::RankInfo& r = joined->ranks(Mod(rank + 1, world));
      absl::StatusOr<exchange::TcpConnection> conn = exchange::TcpConnection::Connect(
          r.data_address(), options_.rendezvous_timeout_seconds, abort_check);
      if (!conn.ok()) {
        return absl::UnavailableError(
            absl::StrCat("cannot reach ", r.name(), "'s data plane: ", conn.status().message()));
      }
      absl::Status s =
          SendHandshake(*conn, rank, joined->generation(), options_.token, abort_check);
      if (!s.ok()) {
        return absl::UnavailableError(absl::StrCat("handshake with ", r.name(), ": ", s.message()));
      }
      right = *std::move(conn);
      const int left_rank = Mod(rank - 1, world);
      const double deadline = clock_.NowSeconds() + options_.rendezvous_timeout_seconds;
      while (!left.valid()) {
        const double remaining = deadline - clock_.NowSeconds();
        absl::StatusOr<exchange::TcpConnection> in =
            listener->Accept(std::max(remaining, 0.0), abort_check);
        if (!in.ok()) {
          return absl::UnavailableError(absl::StrCat("no data-plane connection from ",
                                                     joined->ranks(left_rank).name(), ": ",
                                                     in.status().message()));
        }
        // A connection that is not our left neighbour of this generation
        // with the job token is refused and logged; keep waiting.
        const double until = clock_.NowSeconds() + kHandshakeSeconds;
        auto handshake_check = [&]() -> absl::Status {
          if (clock_.NowSeconds() > until)
            return absl::DeadlineExceededError("handshake timed out");
          return client_->AbortStatus();
        };
        const absl::Status hs =
            ReceiveHandshake(*in, left_rank, joined->generation(), options_.token, handshake_check);
        if (!hs.ok()) {
          log_(absl::StrCat("refused a data-plane connection: ", hs.message()));
          continue;
        }
        left = *std::move(in);
      }
    }
    RingOptions ro;
    ro.chunk_bytes = options_.chunk_bytes;
    ro.dtype = options_.wire_dtype;
    auto ring = std::make_unique<RingAllreduce>(rank, world, std::move(right), std::move(left), ro);
    if (options_.max_send_rate > 0) ring->set_max_send_rate(options_.max_send_rate);
    collective_ = std::move(ring);
  }

  int64_t step = 0;
  if (absl::Status s = BroadcastState(params, &step); !s.ok()) return s;
  reduced_.EnsureSize(params.size());
  const int64_t bucket_elements = std::max<int64_t>(1, options_.bucket_bytes / 4);
  plan_ = std::make_unique<BucketPlan>(static_cast<int64_t>(params.size()), bucket_elements);
  last_checkpoint_time_ = clock_.NowSeconds();
  last_checkpoint_step_ = step;
  comm_ = std::thread([this] { CommLoop(); });
  log_(absl::StrCat(co.name, ": allreduce world of ", world, " formed (",
                    absl::StrJoin(options_.names, " -> "), "), ", plan_->buckets().size(),
                    " bucket(s) of up to ", options_.bucket_bytes >> 20, " MiB, ",
                    step > 0 ? absl::StrCat("resuming at step ", step) : "starting at step 0"));
  return step;
}

absl::Status AllreduceExchange::BroadcastState(std::span<float> params, int64_t* step) {
  // Rank 0's step, optimizer step count and whether optimizer state follows,
  // as int64 bits in a float buffer (a broadcast copies bits exactly).
  int64_t meta[4] = {0, 0, 0, 0};
  const auto states = optimizer_->State();
  if (options_.rank == 0 && !options_.checkpoint_dir.empty()) {
    absl::StatusOr<exchange::CheckpointData> ckpt = exchange::LoadLatestCheckpoint(
        options_.checkpoint_dir, 0, 1, [this](const std::string& w) { log_(w); });
    if (ckpt.ok()) {
      const v1::CheckpointHeader& h = ckpt->header;
      bool fits = ckpt->params.size() == params.size() &&
                  h.state_names_size() == static_cast<int>(states.size());
      for (size_t i = 0; fits && i < states.size(); ++i) {
        fits = h.state_names(static_cast<int>(i)) == states[i].first &&
               ckpt->states[i].size() == states[i].second.size();
      }
      if (!fits) {
        return absl::FailedPreconditionError(
            absl::StrCat("checkpoint ", ckpt->path, " holds ", ckpt->params.size(),
                         " parameters and optimizer "
                         "state for ",
                         h.optimizer(), "; this job has ", params.size(),
                         " parameters: use "
                         "another --checkpoint-dir or remove it"));
      }
      std::copy(ckpt->params.begin(), ckpt->params.end(), params.begin());
      for (size_t i = 0; i < states.size(); ++i) {
        std::copy(ckpt->states[i].begin(), ckpt->states[i].end(), states[i].second.begin());
      }
      meta[0] = h.global_step();
      meta[1] = h.optimizer_steps();
      log_(absl::StrCat("restored ", ckpt->path, " (step ", h.global_step(), ")"));
    } else if (!absl::IsNotFound(ckpt.status())) {
      return ckpt.status();
    }
  }
  float meta_f[8];
  std::memcpy(meta_f, meta, sizeof(meta));
  auto bcast = [this](std::span<float> data) {
    return RunCollective(
        [&](const exchange::IoCheck& c) { return collective_->Broadcast(data, 0, c); });
  };
  if (absl::Status s = bcast(std::span<float>(meta_f, 8)); !s.ok()) return s;
  if (absl::Status s = bcast(params); !s.ok()) return s;
  for (auto& [name, buf] : states) {
    if (absl::Status s = bcast(buf); !s.ok()) return s;
  }
  std::memcpy(meta, meta_f, sizeof(meta));
  *step = meta[0];
  optimizer_->set_steps(meta[1]);
  return absl::OkStatus();
}

absl::Status AllreduceExchange::StallCheck(double started_at, double* next_warning) {
  if (absl::Status s = client_->AbortStatus(); !s.ok()) return s;
  const double waited = clock_.NowSeconds() - started_at;
  if (waited < options_.stall_warning_seconds && waited < options_.peer_timeout_seconds) {
    return absl::OkStatus();
  }
  // Ranks that have not entered this collective, by the latest heartbeats.
  std::vector<PeerView> missing;
  for (const PeerView& p : client_->Peers()) {
    if (p.rank != options_.rank && p.collectives_started < collectives_started_) {
      missing.push_back(p);
    }
  }
  std::vector<std::string> names;
  for (const PeerView& p : missing) {
    names.push_back(absl::StrCat(p.name, " (at collective ", p.collectives_started,
                                 ", last heartbeat ",
                                 static_cast<int64_t>(p.seconds_since_heartbeat), "s ago)"));
  }
  const std::string who =
      names.empty() ? "no rank is behind (a slow link?)" : absl::StrJoin(names, ", ");
  if (options_.metrics != nullptr) {
    options_.metrics->SetAllreduceStallSeconds(waited);
    options_.metrics->SetStalledPeers(static_cast<int>(missing.size()));
  }
  if (waited >= options_.peer_timeout_seconds) {
    int lost = -1;
    double oldest = -1;
    for (const PeerView& p : missing) {
      if (p.seconds_since_heartbeat > oldest) {
        oldest = p.seconds_since_heartbeat;
        lost = p.rank;
      }
    }
    return client_->ReportAbort(
        lost,
        absl::StrCat(lost >= 0 ? absl::StrCat("lost ", options_.names[lost], ": ") : "",
                     "allreduce #", collectives_started_, " waited ", static_cast<int64_t>(waited),
                     "s (--peer-timeout ", options_.peer_timeout_seconds, "s) for ", who));
  }
  if (waited >= *next_warning) {
    log_(absl::StrCat("warning: allreduce #", collectives_started_, " has waited ",
                      static_cast<int64_t>(waited), "s for: ", who));
    *next_warning += options_.stall_warning_seconds;
  }
  return absl::OkStatus();
}

absl::Status AllreduceExchange::RunCollective(
    const std::function<absl::Status(const exchange::IoCheck&)>& op) {
  ++collectives_started_;
  client_->SetProgress(collectives_started_, collectives_finished_);
  const double t0 = clock_.NowSeconds();
  double next_warning = options_.stall_warning_seconds;
  bool stalled = false;
  std::mutex check_mu;  // the ring polls from its sending and receiving threads
  exchange::IoCheck check = [&]() -> absl::Status {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stop_) return absl::CancelledError("the exchange is shutting down");
    }
    std::lock_guard<std::mutex> l(check_mu);
    const absl::Status s = StallCheck(t0, &next_warning);
    stalled = stalled || clock_.NowSeconds() - t0 >= options_.stall_warning_seconds;
    return s;
  };
  absl::Status s = op(check);
  if (stalled && options_.metrics != nullptr) {
    options_.metrics->SetAllreduceStallSeconds(0);
    options_.metrics->SetStalledPeers(0);
  }
  if (s.ok()) {
    ++collectives_finished_;
    client_->SetProgress(collectives_started_, collectives_finished_);
    return s;
  }
  if (absl::IsCancelled(s) || absl::IsAborted(s)) return s;
  // A broken link: report the neighbour and give the job-wide reason (the
  // first lost peer any rank reported), so every rank names the same one.
  const int peer = collective_->failed_peer();
  return client_->ReportAbort(
      peer, peer >= 0 ? absl::StrCat("lost ", options_.names[static_cast<size_t>(peer)], ": ",
                                     s.message())
                      : std::string(s.message()));
}

void AllreduceExchange::CommLoop() {
  FlushDenormalsInThisThread();
  const std::vector<Bucket>& buckets = plan_->buckets();
  while (true) {
    int index;
    const float* grads;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [this] { return stop_ || done_ < launched_; });
      if (stop_) return;
      index = done_;
      grads = grads_;
    }
    absl::Status s;
    {
      std::lock_guard<std::mutex> l(mu_);
      s = error_;
    }
    if (s.ok()) {  // after a failure the rest of the step's buckets are skipped
      const Bucket& b = buckets[static_cast<size_t>(index)];
      std::span<float> out(reduced_.data() + b.offset, static_cast<size_t>(b.length));
      std::memcpy(out.data(), grads + b.offset, static_cast<size_t>(b.length) * sizeof(float));
      const int64_t sent0 = collective_->bytes_sent(), recv0 = collective_->bytes_received();
      const double t0 = clock_.NowSeconds();
      s = RunCollective(
          [&](const exchange::IoCheck& c) { return collective_->AllreduceSum(out, c); });
      if (s.ok() && options_.metrics != nullptr) {
        options_.metrics->RecordExchange(
            metrics::ExchangeOp::kAllreduce, metrics::PeerRole::kWorker, clock_.NowSeconds() - t0,
            collective_->bytes_sent() - sent0, collective_->bytes_received() - recv0);
      }
    }
    std::lock_guard<std::mutex> l(mu_);
    if (!s.ok() && error_.ok()) error_ = s;
    ++done_;
    cv_.notify_all();
  }
}

void AllreduceExchange::Launch(int count) {
  std::lock_guard<std::mutex> l(mu_);
  if (count > launched_) {
    launched_ = count;
    cv_.notify_all();
  }
}

void AllreduceExchange::GradientsReady(std::span<const float> grads, int64_t ready_from) {
  if (plan_ == nullptr) return;
  const int ready = plan_->ReadyCount(ready_from);
  {
    std::lock_guard<std::mutex> l(mu_);
    grads_ = grads.data();
    if (ready > launched_) early_ += ready - launched_;
  }
  Launch(ready);
}

absl::StatusOr<int64_t> AllreduceExchange::Step(int64_t step, std::span<const float> grads,
                                                std::span<float> params) {
  if (plan_ == nullptr) return absl::FailedPreconditionError("Step before Start");
  if (grads.size() != params.size() || grads.size() != reduced_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradient of ", grads.size(), " values for a model of ", reduced_.size()));
  }
  const int all = static_cast<int>(plan_->buckets().size());
  {
    std::lock_guard<std::mutex> l(mu_);
    grads_ = grads.data();
  }
  Launch(all);
  absl::Status error;
  {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return done_ == all; });
    error = error_;
    error_ = absl::OkStatus();
    launched_ = done_ = 0;
  }
  if (!error.ok()) return error;
  const float scale = 1.0f / static_cast<float>(world_size());
  float* g = reduced_.data();
  for (size_t i = 0; i < reduced_.size(); ++i) g[i] *= scale;
  optimizer_->Apply(params, std::span<const float>(g, reduced_.size()), schedule_.At(step));
  const int64_t next = step + 1;
  if (options_.rank == 0 && !options_.checkpoint_dir.empty() &&
      (next == options_.total_steps ||
       (options_.checkpoint_every_steps > 0 &&
        next - last_checkpoint_step_ >= options_.checkpoint_every_steps) ||
       (options_.checkpoint_every_seconds > 0 &&
        clock_.NowSeconds() - last_checkpoint_time_ >= options_.checkpoint_every_seconds))) {
    if (absl::Status s = WriteCheckpoint(params, next); !s.ok()) return s;
  }
  return next;
}

absl::Status AllreduceExchange::WriteCheckpoint(std::span<const float> params, int64_t step) {
  const double t0 = clock_.NowSeconds();
  exchange::CheckpointView view;
  v1::CheckpointHeader& h = view.header;
  h.set_shard_index(0);
  h.set_num_shards(1);
  h.mutable_range()->set_offset(0);
  h.mutable_range()->set_length(params.size());
  h.set_num_params(params.size());
  h.set_global_step(step);
  h.set_total_steps(options_.total_steps);
  h.set_optimizer(options_.optimizer.kind);
  h.set_optimizer_steps(optimizer_->steps());
  view.params = params;
  for (auto& [name, buf] : optimizer_->State()) {
    h.add_state_names(name);
    view.states.push_back(buf);
  }
  absl::StatusOr<std::string> path =
      exchange::WriteCheckpoint(options_.checkpoint_dir, view, options_.keep_checkpoints);
  if (!path.ok()) return path.status();
  last_checkpoint_time_ = clock_.NowSeconds();
  last_checkpoint_step_ = step;
  if (options_.metrics != nullptr) options_.metrics->RecordCheckpoint(last_checkpoint_time_ - t0);
  log_(absl::StrCat("checkpoint ", *path, " (step ", step, ")"));
  return absl::OkStatus();
}

absl::Status AllreduceExchange::Finish() {
  if (plan_ == nullptr) return absl::FailedPreconditionError("Finish before Start");
  // Every rank reaches the end before any goes away: a one-value allreduce
  // is the barrier (the communication thread is idle between steps).
  float token = 1;
  absl::Status s = RunCollective([&](const exchange::IoCheck& c) {
    return collective_->AllreduceSum(std::span<float>(&token, 1), c);
  });
  if (!s.ok()) return s;
  if (token != static_cast<float>(world_size())) {
    return absl::DataLossError(
        absl::StrCat("the final barrier counted ", token, " ranks, not ", world_size()));
  }
  client_->StopHeartbeats();
  return absl::OkStatus();
}

}  // namespace kubetrain::allreduce
