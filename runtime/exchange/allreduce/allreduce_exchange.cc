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
#include "runtime/exchange/checkpoint_policy.h"
#include "runtime/tensor/cpu_device.h"
#include "runtime/tensor/denormals.h"

namespace kubetrain::allreduce {
namespace {

constexpr double kHandshakeSeconds = 5;
// The id a test's DeviceCollective gets in place of NCCL's.
constexpr char kTestCollectiveId[] = "test-device-collective";

uint64_t NewIncarnation() {
  std::random_device rd;
  return (uint64_t{rd()} << 32 | rd()) | 1;
}

int Mod(int a, int n) { return ((a % n) + n) % n; }

size_t Bytes(size_t floats) { return floats * sizeof(float); }

// Watch's stall bookkeeping: the ring polls its IoCheck from its sending
// and its receiving thread.
struct StallWatch {
  absl::Mutex mu;
  double next_warning ABSL_GUARDED_BY(mu) = 0;
  bool stalled ABSL_GUARDED_BY(mu) = false;
};

}  // namespace

AllreduceExchange::AllreduceExchange(AllreduceExchangeOptions options, optim::LrSchedule schedule,
                                     const Clock& clock,
                                     std::function<void(const std::string&)> log)
    : options_(std::move(options)),
      schedule_(std::move(schedule)),
      clock_(clock),
      log_(std::move(log)),
      incarnation_(NewIncarnation()),
      checkpoints_({.dir = options_.checkpoint_dir,
                    .every_steps = options_.checkpoint_every_steps,
                    .every_seconds = options_.checkpoint_every_seconds,
                    .keep = options_.keep_checkpoints},
                   clock_, log_, options_.metrics) {}

AllreduceExchange::~AllreduceExchange() {
  std::string leave;
  {
    absl::MutexLock l(&joined_mu_);
    if (joined_) leave = leave_reason_;
  }
  if (!leave.empty()) client_->Leave(leave);
  // Rank 0 hosts the rendezvous: after a lost peer it stays until the other
  // ranks have the job-wide reason, or they would blame rank 0's exit.
  if (!options_.reform && server_ != nullptr && client_ != nullptr &&
      !client_->AbortStatus().ok()) {
    server_->WaitUntilAbortIsKnown(std::min(5.0, options_.peer_timeout_seconds));
  }
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
    cv_.SignalAll();
  }
  if (ring_ != nullptr) ring_->Shutdown();
  if (comm_.joinable()) comm_.join();
  if (device_collective_ != nullptr) {
    // Collectives a failed step left queued would wait for their peers
    // forever (and so would freeing the buffers they use): abandon them,
    // before the buffers go.
    if (!finished_) device_collective_->Shutdown();
    device_collective_.reset();
  }
  if (client_ != nullptr) client_->StopHeartbeats();
}

void AllreduceExchange::Leave(const std::string& reason) {
  leaving_.store(true);
  {
    absl::MutexLock l(&joined_mu_);
    if (!joined_) return;
  }
  if (options_.reform) {
    if (options_.max_workers > 0 && options_.rank != 0) {
      // A scale-down: this rank finishes the step in flight with the others
      // (its trainer stops at the boundary) and says it leaves as it goes
      // (the destructor), so no step is aborted for it. It joins no other
      // generation: if the world is re-forming (rank 0 left too: a
      // suspended job), it stops waiting now.
      client_->CancelJoins(reason);
      absl::MutexLock l(&joined_mu_);
      leave_reason_ = reason;
      return;
    }
    client_->Leave(reason);
    return;
  }
  client_->ReportAbort(rank_, reason).IgnoreError();  // Aborted: the reason stands
  if (server_ != nullptr) {
    server_->WaitUntilAbortIsKnown(std::min(5.0, options_.peer_timeout_seconds));
  }
}

std::optional<exchange::Membership> AllreduceExchange::CurrentMembership() const {
  // Only an elastic world reshards its data; a fixed one keeps the shards
  // of its replica indexes (a re-formed fixed world has the same ranks).
  if (!options_.reform || options_.max_workers <= 0 || world_.empty()) return std::nullopt;
  return exchange::Membership{rank_, static_cast<int>(world_.size()), generation_number_};
}

float AllreduceExchange::LearningRate(int64_t step) const {
  const float lr = schedule_.At(step);
  if (!options_.scale_lr_with_world || options_.max_workers <= 0 || options_.min_workers <= 0 ||
      world_.empty()) {
    return lr;
  }
  return lr * static_cast<float>(world_.size()) / static_cast<float>(options_.min_workers);
}

std::string AllreduceExchange::name() const {
  return absl::StrCat("allreduce-", backend_.empty() ? options_.backend : backend_);
}

absl::StatusOr<int64_t> AllreduceExchange::Start(std::span<float> params) {
  const int world = world_size();
  const int index = options_.rank;
  const bool elastic = options_.reform && options_.max_workers > 0;
  if (world < 1 || index < 0 || index >= (elastic ? options_.max_workers : world)) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", index, " outside a world of ",
                                                   elastic ? options_.max_workers : world));
  }
  if (elastic && (options_.min_workers < 1 || options_.min_workers > options_.max_workers)) {
    return absl::InvalidArgumentError(absl::StrCat("--min-workers ", options_.min_workers,
                                                   " and --max-workers ", options_.max_workers,
                                                   ": need 1 <= min <= max"));
  }
  device_ = options_.device;
  if (device_ == nullptr) {
    own_device_ = std::make_unique<CpuDevice>();
    device_ = own_device_.get();
  }
  on_gpu_ = !device_->host_memory();
  test_collective_ = static_cast<bool>(options_.device_collective_for_test);
  nccl_compiled_ = NcclCompiledIn() || test_collective_;
  if (absl::Status s =
          CheckRequestedBackend(options_.backend, nccl_compiled_, on_gpu_ || test_collective_);
      !s.ok()) {
    return s;
  }
  // The optimizer's state lives where the parameters do, and it runs there.
  absl::StatusOr<std::unique_ptr<optim::Optimizer>> opt =
      optim::MakeOptimizer(options_.optimizer, params.size(), device_);
  if (!opt.ok()) return opt.status();
  optimizer_ = *std::move(opt);

  // The data-plane listener exists before this rank joins, so every peer
  // that learns its address can connect.
  absl::StatusOr<exchange::TcpListener> listener =
      exchange::TcpListener::Listen(options_.data_listen_host, 0);
  if (!listener.ok()) return listener.status();
  listener_ = *std::move(listener);
  std::string rendezvous = options_.rendezvous_address;
  if (index == 0) {
    RendezvousServerOptions so;
    so.listen_address = options_.rendezvous_listen_address;
    so.names = options_.names;
    so.token = options_.token;
    so.generation = incarnation_;
    so.join_timeout_seconds = options_.rendezvous_timeout_seconds;
    so.peer_timeout_seconds = options_.peer_timeout_seconds;
    so.reform = options_.reform;
    if (elastic) {
      so.min_world = options_.min_workers;
      so.max_world = options_.max_workers;
    }
    // Whether NCCL runs is known only once every rank has said where its
    // tensors are; the id costs little, so rank 0 makes one whenever it may
    // (and one for each later generation: a communicator is not reused).
    if (on_gpu_ && nccl_compiled_ && options_.backend != "ring") {
      const bool test = test_collective_;
      auto make_id = [test]() -> absl::StatusOr<std::string> {
        return test ? absl::StatusOr<std::string>(kTestCollectiveId) : NewNcclUniqueId();
      };
      absl::StatusOr<std::string> id = make_id();
      if (id.ok()) {
        so.nccl_unique_id = *id;
        so.new_nccl_unique_id = [make_id]() -> std::string {
          absl::StatusOr<std::string> next = make_id();
          return next.ok() ? *next : std::string();
        };
      } else if (options_.backend == "nccl") {
        return id.status();
      } else {
        log_(absl::StrCat("no NCCL id (the ring will run): ", id.status().message()));
      }
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
  co.rank = index;
  co.world_size = world;
  co.name = static_cast<size_t>(index) < options_.names.size()
                ? options_.names[static_cast<size_t>(index)]
                : absl::StrCat("worker-", index);
  co.rank0_name = options_.names[0];
  co.data_address = absl::StrCat(options_.data_advertise_host, ":", listener_.port());
  if (on_gpu_) {
    co.device_uuid = device_->info().uuid.empty()
                         ? absl::StrCat(device_->info().Id(), " (no UUID) of ", co.name)
                         : device_->info().uuid;
  }
  co.incarnation = incarnation_;
  co.join_timeout_seconds = options_.rendezvous_timeout_seconds;
  co.peer_timeout_seconds = options_.peer_timeout_seconds;
  co.heartbeat_seconds = options_.heartbeat_seconds;
  name_ = co.name;
  client_ = std::make_unique<RendezvousClient>(co, clock_, log_);
  log_(absl::StrCat(co.name, ": joining the allreduce rendezvous at ",
                    index == 0 ? absl::StrCat("port ", server_->port()) : rendezvous, " (rank ",
                    index, " of ", world, ", tensors on ", device_->info().Id(), ")"));
  FormStage stage;
  return FormWorld(params, /*state_step=*/-1, /*last_generation=*/0, &stage);
}

absl::StatusOr<int64_t> AllreduceExchange::FormWorld(std::span<float> params, int64_t state_step,
                                                     uint64_t last_generation, FormStage* stage) {
  *stage = FormStage::kJoin;
  const std::string& me = name_;
  absl::StatusOr<v1::JoinResponse> joined = client_->Join(state_step, last_generation);
  if (!joined.ok()) return joined.status();
  // From here on the generation formed with this rank (Reform counts its
  // changes whatever fails next).
  changes_ = {joined->joined(), joined->left(), joined->lost()};
  *stage = FormStage::kConnect;
  const int world = joined->ranks_size();
  if (!options_.reform && static_cast<size_t>(world) != options_.names.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the rendezvous answered a world of ", world,
                                                   " ranks, expected ", options_.names.size()));
  }
  rank_ = -1;
  for (const v1::RankInfo& r : joined->ranks()) {
    if (r.index() == options_.rank && r.incarnation() == incarnation_) rank_ = r.rank();
  }
  if (rank_ < 0) {
    return absl::InternalError(absl::StrCat("the rendezvous answered a world without ", me));
  }
  world_.assign(joined->ranks().begin(), joined->ranks().end());
  const bool first = generation_number_ == 0;
  generation_number_ = joined->generation_number();
  client_->StartHeartbeats(joined->generation(), rank_);
  {
    absl::MutexLock l(&joined_mu_);
    joined_ = true;
  }

  // Every rank decides from the same world, so all pick the same backend
  // (or all refuse a forced one, naming why).
  std::vector<RankDevice> devices;
  for (const v1::RankInfo& r : joined->ranks()) devices.push_back({r.name(), r.device_uuid()});
  addresses_.assign(static_cast<size_t>(world), "");
  for (const v1::RankInfo& r : joined->ranks()) {
    if (r.rank() >= 0 && r.rank() < world)
      addresses_[static_cast<size_t>(r.rank())] = r.data_address();
  }
  absl::StatusOr<BackendChoice> choice = ChooseCollectiveBackend(
      options_.backend, nccl_compiled_, devices, !joined->nccl_unique_id().empty());
  if (!choice.ok()) return choice.status();
  backend_ = choice->backend;
  if (backend_ == "nccl") {
    const double until = clock_.NowSeconds() + options_.rendezvous_timeout_seconds;
    const exchange::IoCheck joining = [this, until]() -> absl::Status {
      if (clock_.NowSeconds() > until) {
        return absl::UnavailableError(
            "the NCCL communicator did not form within --rendezvous-timeout");
      }
      return client_->AbortStatus();
    };
    absl::StatusOr<std::unique_ptr<DeviceCollective>> c =
        test_collective_
            ? options_.device_collective_for_test(rank_, world, joined->nccl_unique_id())
            : MakeNcclCollective(rank_, world, joined->nccl_unique_id(), *device_, joining);
    if (!c.ok()) return c.status();
    device_collective_ = *std::move(c);
    mode_ = Mode::kDevice;
  } else if (world == 1) {
    mode_ = Mode::kSolo;
  } else {
    if (absl::Status s = ConnectRing(*joined, listener_); !s.ok()) return s;
    mode_ = on_gpu_ ? Mode::kStagedRing : Mode::kHostRing;
  }
  if (first) {
    log_(absl::StrCat(
        me, ": allreduce backend ", backend_, ": ", choice->reason,
        mode_ == Mode::kStagedRing ? " (GPU buckets staged through pinned memory)" : ""));
  }

  // Buffers before the state broadcast: a device too small fails here.
  if (absl::Status s = AllocateBuffers(params.size()); !s.ok()) return s;

  // The newest state: the member's the rendezvous named, or (nobody has
  // one) rank 0's newest checkpoint.
  const int root = joined->state_rank();
  const bool anyone_has_state = joined->ranks(root).state_step() >= 0;
  int64_t step = std::max<int64_t>(state_step, 0);    // the root's; the others take it
  if (rank_ != root) *stage = FormStage::kBroadcast;  // the root's own state stays whole
  if (absl::Status s = BroadcastState(params, &step, root, !anyone_has_state); !s.ok()) return s;
  *stage = FormStage::kFormed;
  checkpoints_.Restart(step);
  {
    absl::MutexLock l(&mu_);
    stop_ = false;
  }
  if (mode_ != Mode::kSolo) comm_ = std::thread([this] { CommLoop(); });

  std::vector<std::string> names;
  for (const v1::RankInfo& r : world_) names.push_back(r.name());
  if (options_.metrics != nullptr) {
    options_.metrics->SetWorld(world, generation_number_,
                               rank_ == 0 ? names : std::vector<std::string>{});
  }
  if (first) {
    log_(absl::StrCat(
        me, ": allreduce world of ", world, " formed (", absl::StrJoin(names, " -> "), "), ",
        plan_->buckets().size(), " bucket(s) of up to ", options_.bucket_bytes >> 20, " MiB, ",
        step > 0 ? absl::StrCat("resuming at step ", step) : "starting at step 0",
        generation_number_ > 1
            ? absl::StrCat(" (generation ", generation_number_, ": ", joined->change(), ")")
            : ""));
  } else {
    log_(absl::StrCat("generation ", generation_number_, " formed at step ", step, ": world ",
                      world, " (", absl::StrJoin(names, " -> "), "; ", joined->change(),
                      "), state from ", joined->ranks(root).name(),
                      anyone_has_state ? "" : "'s newest checkpoint", ", backend ", backend_));
  }
  return step;
}

void AllreduceExchange::TearDown() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
    cv_.SignalAll();
  }
  if (ring_ != nullptr) ring_->Shutdown();
  if (comm_.joinable()) comm_.join();
  ring_.reset();
  if (device_collective_ != nullptr) {
    device_collective_->Shutdown();
    device_collective_.reset();
  }
  client_->StopHeartbeats();
  {
    absl::MutexLock l(&mu_);
    grads_ = nullptr;
    launched_ = done_ = 0;
    join_to_watch_ = join_watched_ = join_started_ = 0;
    error_ = absl::OkStatus();
    stop_ = false;  // the next generation's collectives run
  }
  {
    absl::MutexLock l(&count_mu_);
    collectives_started_ = collectives_finished_ = 0;
  }
  mode_ = Mode::kSolo;
}

absl::StatusOr<int64_t> AllreduceExchange::Reform(std::span<float> params, int64_t state_step,
                                                  absl::Status why) {
  if (!options_.reform || leaving_.load()) return why;
  // Errors of this rank's own (a driver fault, misuse) are not a changed world.
  if (absl::IsInternal(why) || absl::IsFailedPrecondition(why) || absl::IsInvalidArgument(why) ||
      absl::IsResourceExhausted(why) || absl::IsDataLoss(why)) {
    return why;
  }
  const std::string reason = client_->AbortStatus().ok()
                                 ? std::string(why.message())
                                 : std::string(client_->AbortStatus().message());
  log_(absl::StrCat("generation ", generation_number_, " is over (", reason,
                    "): re-forming the world",
                    state_step >= 0 ? absl::StrCat(" with this rank's state at step ", state_step)
                                    : " (this rank's state is not complete: it takes another's)"));
  constexpr int kAttempts = 20;
  absl::Status last = why;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    TearDown();
    if (leaving_.load()) return last;
    FormStage stage;
    absl::StatusOr<int64_t> step = FormWorld(params, state_step, generation_number_, &stage);
    // A generation this rank joined counts its changes even when its links
    // or state then fail: the next one's are counted from it, not from the
    // generation before.
    if (stage != FormStage::kJoin && options_.metrics != nullptr) {
      using Change = metrics::RuntimeMetrics::MembershipChange;
      options_.metrics->AddMembershipChanges(Change::kJoined, changes_[0]);
      options_.metrics->AddMembershipChanges(Change::kLeft, changes_[1]);
      options_.metrics->AddMembershipChanges(Change::kLost, changes_[2]);
    }
    if (step.ok()) return step;
    last = step.status();
    // The join itself waited the whole --rendezvous-timeout (or was
    // refused), or this rank's own fault.
    if (stage == FormStage::kJoin || absl::IsInvalidArgument(last) || absl::IsInternal(last) ||
        absl::IsFailedPrecondition(last) || absl::IsResourceExhausted(last)) {
      return last;
    }
    // The join succeeded: generation_number_ is the generation that failed.
    log_(absl::StrCat("forming generation ", generation_number_, " failed (", last.message(),
                      "): joining again"));
    if (stage == FormStage::kBroadcast) state_step = -1;  // part of it may be another's now
  }
  return last;
}

absl::Status AllreduceExchange::AllocateBuffers(size_t n) {
  const int64_t bucket_elements = std::max<int64_t>(1, options_.bucket_bytes / 4);
  if (plan_ == nullptr) {
    plan_ = std::make_unique<BucketPlan>(static_cast<int64_t>(n), bucket_elements);
  }
  if (mode_ != Mode::kSolo && reduced_.data() == nullptr) {
    absl::StatusOr<DeviceBuffer> r = device_->Allocate(Bytes(n));
    if (!r.ok()) return r.status();
    reduced_ = *std::move(r);
    absl::StatusOr<DeviceBuffer> sc = device_->Allocate(Bytes(8));
    if (!sc.ok()) return sc.status();
    scalars_ = *std::move(sc);
  }
  if (mode_ == Mode::kStagedRing && staging_.data() == nullptr) {
    absl::StatusOr<DeviceBuffer> st = device_->AllocatePinnedHost(Bytes(n));
    if (!st.ok()) return st.status();
    staging_ = *std::move(st);
    for (size_t b = 0; b < plan_->buckets().size(); ++b) {
      absl::StatusOr<std::unique_ptr<DeviceEvent>> e = device_->NewEvent();
      if (!e.ok()) return e.status();
      bucket_staged_.push_back(*std::move(e));
    }
  }
  return absl::OkStatus();
}

absl::Status AllreduceExchange::ConnectRing(const v1::JoinResponse& joined,
                                            exchange::TcpListener& listener) {
  const int world = joined.ranks_size();
  const int rank = rank_;
  // Ring links: dial the right neighbour, then take the left one's call.
  exchange::TcpConnection right, left;
  auto abort_check = [this] { return client_->AbortStatus(); };
  const v1::RankInfo& r = joined.ranks(Mod(rank + 1, world));
  absl::StatusOr<exchange::TcpConnection> conn = exchange::TcpConnection::Connect(
      r.data_address(), options_.rendezvous_timeout_seconds, abort_check);
  if (!conn.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach ", r.name(), "'s data plane: ", conn.status().message()));
  }
  absl::Status s = SendHandshake(*conn, rank, joined.generation(), options_.token, abort_check);
  if (!s.ok()) {
    return absl::UnavailableError(absl::StrCat("handshake with ", r.name(), ": ", s.message()));
  }
  right = *std::move(conn);
  const int left_rank = Mod(rank - 1, world);
  const double deadline = clock_.NowSeconds() + options_.rendezvous_timeout_seconds;
  while (!left.valid()) {
    const double remaining = deadline - clock_.NowSeconds();
    absl::StatusOr<exchange::TcpConnection> in =
        listener.Accept(std::max(remaining, 0.0), abort_check);
    if (!in.ok()) {
      return absl::UnavailableError(absl::StrCat("no data-plane connection from ",
                                                 joined.ranks(left_rank).name(), ": ",
                                                 in.status().message()));
    }
    // A connection that is not our left neighbour of this generation with
    // the job token is refused and logged; keep waiting.
    const double until = clock_.NowSeconds() + kHandshakeSeconds;
    auto handshake_check = [&]() -> absl::Status {
      if (clock_.NowSeconds() > until) return absl::DeadlineExceededError("handshake timed out");
      return client_->AbortStatus();
    };
    const absl::Status hs =
        ReceiveHandshake(*in, left_rank, joined.generation(), options_.token, handshake_check);
    if (!hs.ok()) {
      log_(absl::StrCat("refused a data-plane connection: ", hs.message()));
      continue;
    }
    left = *std::move(in);
  }
  RingOptions ro;
  ro.chunk_bytes = options_.chunk_bytes;
  ro.dtype = options_.wire_dtype;
  auto ring = std::make_unique<RingAllreduce>(rank, world, std::move(right), std::move(left), ro);
  if (options_.max_send_rate > 0) ring->set_max_send_rate(options_.max_send_rate);
  ring_ = std::move(ring);
  return absl::OkStatus();
}

absl::Status AllreduceExchange::BroadcastDeviceSpan(std::span<float> data, int root) {
  switch (mode_) {
    case Mode::kSolo:
      return absl::OkStatus();
    case Mode::kHostRing:
      return RunCollective(
          [&](const exchange::IoCheck& c) { return ring_->Broadcast(data, root, c); });
    case Mode::kStagedRing: {
      std::vector<float> host(data.size());
      if (absl::Status s = device_->CopyToHost(data.data(), host.data(), Bytes(data.size()));
          !s.ok()) {
        return s;
      }
      if (absl::Status s = RunCollective(
              [&](const exchange::IoCheck& c) { return ring_->Broadcast(host, root, c); });
          !s.ok()) {
        return s;
      }
      device_->CopyToDevice(host.data(), data.data(), Bytes(data.size()));
      return device_->Synchronize();
    }
    case Mode::kDevice:
      return RunCollective([&](const exchange::IoCheck& c) -> absl::Status {
        if (absl::Status s = device_collective_->Broadcast(
                data.data(), static_cast<int64_t>(data.size()), root, c);
            !s.ok()) {
          return s;
        }
        absl::StatusOr<int64_t> join = device_collective_->Join();
        if (!join.ok()) return join.status();
        return device_collective_->WaitJoined(*join, c);
      });
  }
  return absl::InternalError("unknown allreduce mode");
}

absl::Status AllreduceExchange::BroadcastState(std::span<float> params, int64_t* step, int root,
                                               bool load_checkpoint) {
  // The root's step, optimizer step count and data position (epoch and
  // cursor; -1: derive it from the step), as int64 bits in a float buffer
  // (a broadcast copies bits exactly).
  const std::optional<exchange::DataPosition> position = PositionAt(*step);
  int64_t meta[4] = {*step, optimizer_->steps(), position ? position->epoch : -1,
                     position ? position->cursor : -1};
  const auto states = optimizer_->State();  // in the device's memory
  if (load_checkpoint || *step == 0) {
    meta[0] = meta[1] = 0;
    meta[2] = meta[3] = -1;
  }
  if (rank_ == root && load_checkpoint && !options_.checkpoint_dir.empty()) {
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
      device_->CopyToDevice(ckpt->params.data(), params.data(), Bytes(params.size()));
      for (size_t i = 0; i < states.size(); ++i) {
        device_->CopyToDevice(ckpt->states[i].data(), states[i].second.data(),
                              Bytes(states[i].second.size()));
      }
      meta[0] = h.global_step();
      meta[1] = h.optimizer_steps();
      if (ckpt->data_position) {
        meta[2] = ckpt->data_position->epoch;
        meta[3] = ckpt->data_position->cursor;
      }
      log_(absl::StrCat("restored ", ckpt->path, " (step ", h.global_step(), ")"));
    } else if (!absl::IsNotFound(ckpt.status())) {
      return ckpt.status();
    }
  }
  if (mode_ != Mode::kSolo) {
    float meta_f[8];
    std::memcpy(meta_f, meta, sizeof(meta));
    if (mode_ == Mode::kDevice) {
      // The broadcast reads device memory: the meta goes through scalars_.
      device_->CopyToDevice(meta_f, scalars_.data(), sizeof(meta_f));
      if (absl::Status s = BroadcastDeviceSpan(std::span<float>(scalars_.data(), 8), root);
          !s.ok()) {
        return s;
      }
      if (absl::Status s = device_->CopyToHost(scalars_.data(), meta_f, sizeof(meta_f)); !s.ok()) {
        return s;
      }
    } else if (absl::Status s = RunCollective([&](const exchange::IoCheck& c) {
                 return ring_->Broadcast(std::span<float>(meta_f, 8), root, c);
               });
               !s.ok()) {
      return s;
    }
    std::memcpy(meta, meta_f, sizeof(meta));
    if (absl::Status s = BroadcastDeviceSpan(params, root); !s.ok()) return s;
    for (auto& [name, buf] : states) {
      if (absl::Status s = BroadcastDeviceSpan(buf, root); !s.ok()) return s;
    }
  }
  *step = meta[0];
  optimizer_->set_steps(meta[1]);
  taken_.reset();
  if (meta[2] >= 0 && meta[3] >= 0) taken_ = exchange::DataPosition{meta[2], meta[3]};
  return absl::OkStatus();
}

absl::Status AllreduceExchange::StallCheck(double started_at, double* next_warning) {
  if (absl::Status s = client_->AbortStatus(); !s.ok()) return s;
  int64_t started;
  {
    absl::MutexLock l(&count_mu_);
    started = collectives_started_;
  }
  const double waited = clock_.NowSeconds() - started_at;
  if (waited < options_.stall_warning_seconds && waited < options_.peer_timeout_seconds) {
    return absl::OkStatus();
  }
  // Ranks that have not entered this collective, by the latest heartbeats.
  std::vector<PeerView> missing;
  for (const PeerView& p : client_->Peers()) {
    if (p.rank != rank_ && p.collectives_started < started) {
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
        lost, absl::StrCat(lost >= 0 ? absl::StrCat("lost ", PeerLabel(lost), ": ") : "",
                           "allreduce #", started, " waited ", static_cast<int64_t>(waited),
                           "s (--peer-timeout ", options_.peer_timeout_seconds, "s) for ", who));
  }
  if (waited >= *next_warning) {
    log_(absl::StrCat("warning: allreduce #", started, " has waited ", static_cast<int64_t>(waited),
                      "s for: ", who));
    *next_warning += options_.stall_warning_seconds;
  }
  return absl::OkStatus();
}

std::string AllreduceExchange::PeerLabel(int rank) const {
  const size_t r = static_cast<size_t>(rank);
  if (rank < 0 || r >= world_.size()) return absl::StrCat("rank ", rank);
  const std::string& name = world_[r].name();
  const std::string address = r < addresses_.size() ? addresses_[r] : "";
  return absl::StrCat(
      name, " (",
      options_.job_name.empty() ? "" : absl::StrCat("pod ", options_.job_name, "-", name, ", "),
      "rank ", rank, address.empty() ? "" : ", ", address, ")");
}

void AllreduceExchange::CountStarted() {
  absl::MutexLock l(&count_mu_);
  ++collectives_started_;
  client_->SetProgress(collectives_started_, collectives_finished_);
}

void AllreduceExchange::CountFinished() {
  absl::MutexLock l(&count_mu_);
  ++collectives_finished_;
  client_->SetProgress(collectives_started_, collectives_finished_);
}

absl::Status AllreduceExchange::RunCollective(
    const std::function<absl::Status(const exchange::IoCheck&)>& op) {
  CountStarted();
  absl::Status s = Watch(op);
  if (s.ok()) CountFinished();
  return s;
}

absl::Status AllreduceExchange::Watch(
    const std::function<absl::Status(const exchange::IoCheck&)>& op) {
  const double t0 = clock_.NowSeconds();
  StallWatch watch;
  {
    absl::MutexLock l(&watch.mu);
    watch.next_warning = options_.stall_warning_seconds;
  }
  exchange::IoCheck check = [&]() -> absl::Status {
    {
      absl::MutexLock l(&mu_);
      if (stop_) return absl::CancelledError("the exchange is shutting down");
    }
    absl::MutexLock l(&watch.mu);
    const absl::Status s = StallCheck(t0, &watch.next_warning);
    watch.stalled = watch.stalled || clock_.NowSeconds() - t0 >= options_.stall_warning_seconds;
    return s;
  };
  absl::Status s = op(check);
  bool stalled;
  {
    absl::MutexLock l(&watch.mu);
    stalled = watch.stalled;
  }
  if (stalled && options_.metrics != nullptr) {
    options_.metrics->SetAllreduceStallSeconds(0);
    options_.metrics->SetStalledPeers(0);
  }
  if (s.ok() || absl::IsCancelled(s) || absl::IsAborted(s)) return s;
  // A driver fault or misuse is this rank's own: no peer to blame.
  if (absl::IsInternal(s) || absl::IsFailedPrecondition(s) || absl::IsInvalidArgument(s) ||
      absl::IsResourceExhausted(s)) {
    return s;
  }
  // A broken link: report the neighbour and give the job-wide reason (the
  // first lost peer any rank reported), so every rank names the same one.
  const int peer = ring_ != nullptr ? ring_->failed_peer() : -1;
  return client_->ReportAbort(peer, peer >= 0
                                        ? absl::StrCat("lost ", PeerLabel(peer), ": ", s.message())
                                        : std::string(s.message()));
}

bool AllreduceExchange::CommWorkLocked() const {
  return stop_ || (mode_ == Mode::kDevice ? join_watched_ < join_to_watch_ : done_ < launched_);
}

bool AllreduceExchange::JoinWatchedLocked() const {
  return join_watched_ >= join_to_watch_ || !error_.ok();
}

void AllreduceExchange::CommLoop() {
  FlushDenormalsInThisThread();
  const std::vector<Bucket>& buckets = plan_->buckets();
  mu_.Lock();
  while (true) {
    while (!CommWorkLocked()) cv_.Wait(&mu_);
    if (stop_) break;
    if (mode_ == Mode::kDevice) {
      const int64_t join = join_to_watch_;
      const int64_t started = join_started_;
      mu_.Unlock();
      const absl::Status s = WatchJoin(join, started);
      mu_.Lock();
      if (!s.ok() && error_.ok()) error_ = s;
      join_watched_ = join;
      cv_.SignalAll();
      continue;
    }
    const int index = done_;
    const float* grads = grads_;
    absl::Status s = error_;
    mu_.Unlock();
    if (s.ok()) s = ReduceBucket(buckets[static_cast<size_t>(index)], index, grads);
    mu_.Lock();
    if (!s.ok() && error_.ok()) error_ = s;  // the step's other buckets are skipped
    ++done_;
    cv_.SignalAll();
  }
  mu_.Unlock();
}

absl::Status AllreduceExchange::ReduceBucket(const Bucket& b, int index, const float* grads) {
  const size_t len = static_cast<size_t>(b.length);
  float* out;
  if (mode_ == Mode::kStagedRing) {
    // The bucket's queued copy to pinned memory must have run.
    if (absl::Status s = bucket_staged_[static_cast<size_t>(index)]->Wait(); !s.ok()) return s;
    out = staging_.data() + b.offset;
  } else {
    out = reduced_.data() + b.offset;
    std::memcpy(out, grads + b.offset, Bytes(len));
  }
  const int64_t sent0 = ring_->bytes_sent(), recv0 = ring_->bytes_received();
  const double t0 = clock_.NowSeconds();
  absl::Status s = RunCollective([&](const exchange::IoCheck& c) {
    return ring_->AllreduceSum(std::span<float>(out, len), c);
  });
  if (s.ok() && options_.metrics != nullptr) {
    options_.metrics->RecordExchange(metrics::ExchangeOp::kAllreduce, metrics::PeerRole::kWorker,
                                     clock_.NowSeconds() - t0, ring_->bytes_sent() - sent0,
                                     ring_->bytes_received() - recv0);
  }
  return s;
}

absl::Status AllreduceExchange::WatchJoin(int64_t join, int64_t started) {
  const int64_t bytes0 = device_collective_->bytes();
  const double t0 = clock_.NowSeconds();
  absl::Status s =
      Watch([&](const exchange::IoCheck& c) { return device_collective_->WaitJoined(join, c); });
  if (!s.ok()) return s;
  {
    absl::MutexLock l(&count_mu_);
    collectives_finished_ = std::max(collectives_finished_, started);
    client_->SetProgress(collectives_started_, collectives_finished_);
  }
  if (options_.metrics != nullptr) {
    const int64_t moved = device_collective_->bytes() - bytes0;
    options_.metrics->RecordExchange(metrics::ExchangeOp::kAllreduce, metrics::PeerRole::kWorker,
                                     clock_.NowSeconds() - t0, moved, moved);
  }
  return absl::OkStatus();
}

void AllreduceExchange::Launch(int count, const float* grads) {
  const std::vector<Bucket>& buckets = plan_->buckets();
  int from;
  {
    absl::MutexLock l(&mu_);
    grads_ = grads;
    from = launched_;
    if (count <= from) return;
  }
  absl::Status queued;
  // Queuing an NCCL collective may wait (a first connection to a peer): for
  // the rendezvous' word on a lost peer, at most --peer-timeout.
  const double queue_t0 = clock_.NowSeconds();
  const exchange::IoCheck queuing = [this, queue_t0]() -> absl::Status {
    {
      absl::MutexLock l(&mu_);
      if (stop_) return absl::CancelledError("the exchange is shutting down");
    }
    if (clock_.NowSeconds() - queue_t0 > options_.peer_timeout_seconds) {
      return absl::UnavailableError(absl::StrCat("NCCL could not queue an allreduce for ",
                                                 options_.peer_timeout_seconds,
                                                 "s (--peer-timeout)"));
    }
    return client_->AbortStatus();
  };
  for (int i = from; i < count && (mode_ == Mode::kStagedRing || mode_ == Mode::kDevice); ++i) {
    const Bucket& b = buckets[static_cast<size_t>(i)];
    if (mode_ == Mode::kStagedRing) {
      // Queued behind backward's kernels for this bucket; the thread waits
      // for the event before it sends.
      device_->CopyToHostAsync(grads + b.offset, staging_.data() + b.offset,
                               Bytes(static_cast<size_t>(b.length)));
      bucket_staged_[static_cast<size_t>(i)]->Record();
    } else if (queued.ok()) {
      CountStarted();
      queued = device_collective_->AllreduceSum(grads + b.offset, reduced_.data() + b.offset,
                                                b.length, queuing);
      // Buckets already queued would wait for this one forever.
      if (!queued.ok()) device_collective_->Shutdown();
    }
  }
  absl::MutexLock l(&mu_);
  if (!queued.ok() && error_.ok()) error_ = queued;
  launched_ = count;
  if (mode_ == Mode::kDevice) done_ = count;  // queued is all a step waits for
  cv_.SignalAll();
}

void AllreduceExchange::GradientsReady(std::span<const float> grads, int64_t ready_from) {
  if (plan_ == nullptr || mode_ == Mode::kSolo) return;
  const int ready = plan_->ReadyCount(ready_from);
  {
    absl::MutexLock l(&mu_);
    if (ready > launched_) early_ += ready - launched_;
  }
  Launch(ready, grads.data());
}

absl::StatusOr<int64_t> AllreduceExchange::Step(int64_t step, std::span<const float> grads,
                                                std::span<float> params) {
  if (plan_ == nullptr) return absl::FailedPreconditionError("Step before Start");
  if (grads.size() != params.size() || grads.size() != optimizer_->size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradient of ", grads.size(), " values for a model of ", optimizer_->size()));
  }
  const float lr = LearningRate(step);
  if (mode_ == Mode::kSolo) {
    // An elastic world of one re-forms when a replica joins it.
    if (options_.reform && options_.max_workers > 1) {
      if (absl::Status s = client_->AbortStatus(); !s.ok()) return Reform(params, step, s);
    }
    optimizer_->Apply(params, grads, lr, 1.0f);
  } else {
    // The generation may be over without this step's links breaking (a
    // joiner, a leaver that had not sent yet, a loss the rendezvous found):
    // the heartbeat said so. The step before was applied whole.
    if (absl::Status over = client_->AbortStatus(); !over.ok() && options_.reform) {
      int64_t state_step = step;
      if (mode_ == Mode::kDevice) {
        absl::MutexLock l(&mu_);
        while (!JoinWatchedLocked()) cv_.Wait(&mu_);
        if (!error_.ok()) state_step = -1;  // its update may have read a partial sum
      }
      return Reform(params, state_step, over);
    }
    const int all = static_cast<int>(plan_->buckets().size());
    Launch(all, grads.data());
    absl::Status error;
    {
      absl::MutexLock l(&mu_);
      while (done_ != all) cv_.Wait(&mu_);
      error = error_;
      error_ = absl::OkStatus();
      launched_ = done_ = 0;
    }
    // The update of the step before was applied whole: this rank's state
    // continues from `step` (the ring), or cannot be vouched for (NCCL).
    if (!error.ok()) return Reform(params, mode_ == Mode::kDevice ? -1 : step, error);
    int64_t join = 0;
    if (mode_ == Mode::kStagedRing) {
      device_->CopyToDeviceAsync(staging_.data(), reduced_.data(), Bytes(params.size()));
    } else if (mode_ == Mode::kDevice) {
      absl::StatusOr<int64_t> j = device_collective_->Join();
      if (!j.ok()) {
        device_collective_->Shutdown();
        return Reform(params, -1, j.status());
      }
      join = *j;
    }
    optimizer_->Apply(params, std::span<const float>(reduced_.data(), params.size()), lr,
                      1.0f / static_cast<float>(world_size()));
    if (mode_ == Mode::kDevice) {
      // Run at most one step ahead of the collectives the thread has seen
      // finish: wait for the previous step's, then hand it this one's.
      absl::Status watched;
      {
        absl::MutexLock l(&mu_);
        while (!JoinWatchedLocked()) cv_.Wait(&mu_);
        watched = error_;
      }
      // The update just queued may have read a partial sum.
      if (!watched.ok()) return Reform(params, -1, watched);
      absl::MutexLock l(&mu_);
      join_to_watch_ = join;
      {
        absl::MutexLock c(&count_mu_);
        join_started_ = collectives_started_;
      }
      cv_.SignalAll();
    }
  }
  return AfterUpdate(step, params);
}

absl::StatusOr<int64_t> AllreduceExchange::AfterUpdate(int64_t step,
                                                       std::span<const float> params) {
  const int64_t next = step + 1;
  if (rank_ != 0 || !checkpoints_.enabled()) return next;
  // The last step's checkpoint is the job's result: its failure fails the
  // step. A periodic one that fails is logged and tried again later
  // (checkpoint_policy.h).
  std::vector<std::vector<float>> host;
  auto fill = [&](exchange::CheckpointContents& c) {
    return FillCheckpoint(next, params, host, c);
  };
  if (next == options_.total_steps) {
    if (absl::StatusOr<std::string> path = checkpoints_.WriteNow(next, fill); !path.ok()) {
      return path.status();
    }
  } else {
    checkpoints_.MaybeWrite(next, fill);
  }
  return next;
}

std::optional<exchange::DeviceStepPlan> AllreduceExchange::UseDeviceScalars(
    const kernels::StepScalars* scalars) {
  // An elastic world may grow: its steps go through Step.
  if (optimizer_ == nullptr || mode_ != Mode::kSolo ||
      (options_.reform && options_.max_workers > 1)) {
    return std::nullopt;
  }
  optimizer_->UseDeviceScalars(scalars);
  if (scalars == nullptr) return std::nullopt;
  return exchange::DeviceStepPlan{optim::MakeUpdatePlan(schedule_.plan(), options_.optimizer),
                                  optimizer_->steps()};
}

absl::Status AllreduceExchange::QueueStep(std::span<const float> grads, std::span<float> params) {
  if (mode_ != Mode::kSolo) {
    return absl::FailedPreconditionError("only a world of one queues its steps on the device");
  }
  if (grads.size() != params.size() || grads.size() != optimizer_->size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradient of ", grads.size(), " values for a model of ", optimizer_->size()));
  }
  // Queued with the device's scalars; the count is StepQueued's to make.
  const int64_t steps = optimizer_->steps();
  optimizer_->Apply(params, grads, /*lr: the device's*/ 0.0f, 1.0f);
  optimizer_->set_steps(steps);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> AllreduceExchange::StepQueued(int64_t step, std::span<const float> params) {
  optimizer_->set_steps(optimizer_->steps() + 1);
  return AfterUpdate(step, params);
}

std::optional<exchange::DataPosition> AllreduceExchange::PositionAt(int64_t step) const {
  if (position_step_ < 0) return std::nullopt;
  if (step == position_step_) return position_;
  if (step == position_step_ + 1) return position_after_;
  return std::nullopt;
}

absl::Status AllreduceExchange::FillCheckpoint(int64_t step, std::span<const float> params,
                                               std::vector<std::vector<float>>& host,
                                               exchange::CheckpointContents& c) {
  c.num_params = static_cast<int64_t>(params.size());
  c.total_steps = options_.total_steps;
  c.optimizer = options_.optimizer.kind;
  c.optimizer_steps = optimizer_->steps();
  c.data_position = PositionAt(step);
  // Device tensors are written from host copies (the copy waits for the
  // step's queued update).
  auto readable = [&](std::span<const float> data) -> absl::StatusOr<std::span<const float>> {
    if (device_->host_memory()) return data;
    host.emplace_back(data.size());
    if (absl::Status s = device_->CopyToHost(data.data(), host.back().data(), Bytes(data.size()));
        !s.ok()) {
      return s;
    }
    return std::span<const float>(host.back());
  };
  const auto states = optimizer_->State();
  host.reserve(1 + states.size());  // the spans above point into it
  absl::StatusOr<std::span<const float>> p = readable(params);
  if (!p.ok()) return p.status();
  c.params = *p;
  for (const auto& [name, buf] : states) {
    absl::StatusOr<std::span<const float>> b = readable(buf);
    if (!b.ok()) return b.status();
    c.states.emplace_back(name, *b);
  }
  return absl::OkStatus();
}

absl::Status AllreduceExchange::Finish() {
  if (plan_ == nullptr) return absl::FailedPreconditionError("Finish before Start");
  if (mode_ == Mode::kSolo) {
    client_->StopHeartbeats();
    return absl::OkStatus();
  }
  // Every rank reaches the end before any goes away: a one-value allreduce
  // is the barrier (the communication thread is idle between steps).
  float token = 1;
  absl::Status s;
  if (mode_ == Mode::kDevice) {
    {
      absl::MutexLock l(&mu_);
      while (!JoinWatchedLocked()) cv_.Wait(&mu_);
      if (!error_.ok()) return error_;
    }
    device_->CopyToDevice(&token, scalars_.data(), sizeof(token));
    s = RunCollective([&](const exchange::IoCheck& c) -> absl::Status {
      if (absl::Status q = device_collective_->AllreduceSum(scalars_.data(), scalars_.data(), 1, c);
          !q.ok()) {
        return q;
      }
      absl::StatusOr<int64_t> join = device_collective_->Join();
      if (!join.ok()) return join.status();
      return device_collective_->WaitJoined(*join, c);
    });
    if (s.ok()) s = device_->CopyToHost(scalars_.data(), &token, sizeof(token));
  } else {
    s = RunCollective([&](const exchange::IoCheck& c) {
      return ring_->AllreduceSum(std::span<float>(&token, 1), c);
    });
  }
  if (!s.ok()) return s;
  if (token != static_cast<float>(world_size())) {
    return absl::DataLossError(
        absl::StrCat("the final barrier counted ", token, " ranks, not ", world_size()));
  }
  client_->StopHeartbeats();
  finished_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::string> AllreduceExchange::CheckpointNow(int64_t step,
                                                             std::span<const float> params) {
  if (options_.rank != 0 || !checkpoints_.enabled()) return std::string();
  if (optimizer_ == nullptr) return absl::FailedPreconditionError("CheckpointNow before Start");
  if (mode_ == Mode::kDevice) {
    absl::MutexLock l(&mu_);
    while (!JoinWatchedLocked()) cv_.Wait(&mu_);
    if (!error_.ok()) {
      return absl::AbortedError(
          absl::StrCat("no checkpoint at step ", step,
                       ": the last step's collectives failed after its update was queued (",
                       error_.message(), ")"));
    }
  }
  std::vector<std::vector<float>> host;
  auto fill = [&](exchange::CheckpointContents& c) {
    return FillCheckpoint(step, params, host, c);
  };
  return checkpoints_.WriteNow(step, fill);
}

}  // namespace kubetrain::allreduce
