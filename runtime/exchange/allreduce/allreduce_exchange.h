// AllreduceExchange: data-parallel training without parameter servers, as
// Horovod and PyTorch DDP do it. Every rank holds the whole model and its
// own optimizer; gradients are summed across ranks, averaged, and applied
// identically everywhere, so parameters stay bit-identical without being
// sent again.
//
// Parameters, gradients and optimizer state stay in the memory of the
// model's device (options.device; host memory without one), and the
// optimizer runs there. The sum is one of:
//  - a world of one rank: none (nothing to exchange): the optimizer applies
//    the gradient where it is;
//  - NCCL (collective_backend.h picks it when every rank has a GPU of its
//    own): a DeviceCollective over the device's memory, queued as each
//    bucket is ready; the host never waits for it, except that a step does
//    not run more than one step ahead of the collectives the communication
//    thread has seen finish (it watches them for a lost peer);
//  - the TCP ring over host memory: in place for host tensors; GPU tensors
//    are copied bucket by bucket to pinned host memory as backward finishes
//    them (queued copies; the communication thread waits for each bucket's
//    event, then sends it), and the sum is copied back in one queued copy.
//
//  - Start: rank 0 serves the rendezvous, every rank joins it with the UUID
//    of its GPU, all pick the same backend from the world's devices, the
//    ring is connected (each link checked for the job token and the
//    generation), and rank 0 broadcasts the parameters, the optimizer state
//    and the step to continue from: the newest valid checkpoint's when
//    there is one.
//  - Buckets overlap backward: GradientsReady() starts each finished bucket
//    (bucket_plan.h) at once; Step() waits only for what is still in
//    flight, then queues the optimizer.
//  - Stalls: while a collective waits longer than --stall-warning, the rank
//    logs which ranks have not joined it (by replica name, from the
//    rendezvous heartbeats) and exports it; after --peer-timeout, or at once
//    when a link breaks, the job's first reported lost peer is named by
//    every rank. Without `reform` Step then fails with Aborted (a retryable
//    exit: the job restarts from a checkpoint).
//  - Re-forming (`reform`): the world is a generation. What ends one (a
//    rank lost, restarted, leaving, or a new replica joining an elastic
//    world) fails the step in flight on every rank, which then joins the
//    rendezvous again with the step its state continues from (its last
//    completed step; none after a failed NCCL step, whose update may have
//    been queued on a partial sum). The next generation forms once every
//    rank it waits for is there (a fixed world: all of them, the lost one's
//    replacement included; an elastic one: the survivors and the joiners,
//    at least min_workers), and the member with the newest state
//    broadcasts parameters, optimizer state and step to the others; Step
//    returns the step to run next (the aborted one again), so no update is
//    lost or applied twice. The rendezvous stays at worker 0's address: when
//    worker 0 is the one lost, the others wait there for its replacement,
//    which serves it again and takes the survivors' state. When nobody holds
//    a state, rank 0 loads the newest checkpoint (as at the first start).
//  - Checkpoints: rank 0 writes them (checkpoint.h's format: temp file,
//    fsync, rename, CRC, keep k) every N steps / seconds and at the last
//    step, as checkpoint_policy.h says: a failed periodic write is logged
//    and training goes on; a failed last one fails the step.
// Not thread-safe: the trainer calls it from one thread.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_ALLREDUCE_EXCHANGE_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_ALLREDUCE_EXCHANGE_H_

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "api/ports.h"
#include "base/clock.h"
#include "kubetrain/v1/tensor.pb.h"
#include "runtime/exchange/allreduce/bucket_plan.h"
#include "runtime/exchange/allreduce/collective.h"
#include "runtime/exchange/allreduce/device_collective.h"
#include "runtime/exchange/allreduce/rendezvous_client.h"
#include "runtime/exchange/allreduce/rendezvous_server.h"
#include "runtime/exchange/checkpoint_policy.h"
#include "runtime/exchange/exchange.h"
#include "runtime/metrics/runtime_metrics.h"
#include "runtime/optim/lr_schedule.h"
#include "runtime/optim/optimizer.h"
#include "runtime/tensor/compute_device.h"

namespace kubetrain::allreduce {

struct AllreduceExchangeOptions {
  int rank = 0;
  std::vector<std::string> names;  // replica name of each rank; size = world
  // The TrainingJob's name (KUBETRAIN_JOB_NAME), when known: a lost peer is
  // then also named by its pod, <job>-<replica>.
  std::string job_name;
  // Rank 0's rendezvous address (host:port, its kubetrain-port). Rank 0
  // listens on rendezvous_listen_address and dials itself on loopback.
  std::string rendezvous_address;
  std::string rendezvous_listen_address = api::kDefaultListenAddress;
  // Data plane: listen on an ephemeral port of data_listen_host; peers dial
  // data_advertise_host (this replica's Service name) at that port.
  std::string data_listen_host = "0.0.0.0";
  std::string data_advertise_host = "127.0.0.1";
  std::string token;  // api::kEnvJobToken
  double rendezvous_timeout_seconds = 300;
  double stall_warning_seconds = 30;
  double peer_timeout_seconds = 120;
  double heartbeat_seconds = 1;
  int64_t bucket_bytes = 25 << 20;
  int64_t chunk_bytes = 1 << 20;
  v1::WireDType wire_dtype = v1::WIRE_DTYPE_F32;
  std::string backend = "auto";  // auto | ring | nccl
  // Where the parameters and gradients live and the optimizer runs (the
  // model's device; borrowed, must outlive the exchange). nullptr: host
  // memory, on a CPU device of the exchange's own.
  ComputeDevice* device = nullptr;
  // Tests: a DeviceCollective to use where NCCL would be (rank, world,
  // rank 0's NCCL id); it is then treated as compiled in.
  std::function<absl::StatusOr<std::unique_ptr<DeviceCollective>>(int, int, const std::string&)>
      device_collective_for_test;
  optim::OptimizerOptions optimizer;
  int64_t total_steps = 0;     // recorded in checkpoints
  std::string checkpoint_dir;  // rank 0; empty: no checkpoints, no resume
  int64_t checkpoint_every_steps = 500;
  double checkpoint_every_seconds = 60;
  int keep_checkpoints = 3;
  metrics::RuntimeMetrics* metrics = nullptr;  // borrowed, may be null
  double max_send_rate = 0;                    // test hook: bytes/s cap on this rank's ring link
  // Re-form the world after a lost, restarted, joining or leaving rank
  // instead of failing the step (--on-peer-loss reform).
  bool reform = false;
  // Elastic worlds (with reform): between min_workers and max_workers ranks,
  // replica indexes up to max_workers - 1. 0: a fixed world of names.size().
  int min_workers = 0;
  int max_workers = 0;
  // Elastic worlds: the learning rate times world / min_workers.
  bool scale_lr_with_world = false;
};

class AllreduceExchange final : public exchange::Exchange {
 public:
  AllreduceExchange(AllreduceExchangeOptions options, optim::LrSchedule schedule,
                    const Clock& clock, std::function<void(const std::string&)> log);
  ~AllreduceExchange() override;

  std::string name() const override;
  absl::StatusOr<int64_t> Start(std::span<float> params) override;
  void GradientsReady(std::span<const float> grads, int64_t ready_from) override;
  bool TakesGradientsEarly() const override { return true; }
  absl::StatusOr<int64_t> Step(int64_t step, std::span<const float> grads,
                               std::span<float> params) override;
  absl::Status Finish() override;
  // A world of one queues its steps on the device alone (Exchange's capture
  // contract); other worlds answer nullopt.
  std::optional<exchange::DeviceStepPlan> UseDeviceScalars(
      const kernels::StepScalars* scalars) override;
  absl::Status QueueStep(std::span<const float> grads, std::span<float> params) override;
  absl::StatusOr<int64_t> StepQueued(int64_t step, std::span<const float> params) override;

  // From another thread (a signal watcher): this rank is going away. From
  // then on a failing step fails (no re-forming), and a re-forming this
  // rank is waiting in ends now. Tells rank 0 why: with
  // `reform` the others re-form without this rank (or wait for its
  // replacement) — a worker other than worker 0 of an elastic world tells
  // it only as the exchange goes (after its trainer finished the step in
  // flight); without, every other rank exits naming it, and rank 0 waits
  // (at most 5 s) until the others have that reason. Thread-safe; a no-op
  // for rank 0's word before the world has formed.
  void Leave(const std::string& reason) ABSL_LOCKS_EXCLUDED(joined_mu_);

  std::optional<exchange::Membership> CurrentMembership() const override;
  void SetDataPosition(int64_t step, const exchange::DataPosition& start,
                       const exchange::DataPosition& after) override {
    position_step_ = step;
    position_ = start;
    position_after_ = after;
  }
  std::optional<exchange::DataPosition> TakenDataPosition() const override { return taken_; }

  // The learning rate of `step` in the current world.
  float LearningRate(int64_t step) const;
  // The world of the current generation (the trainer's thread; before
  // Start: the configured one).
  int world_size() const {
    return world_.empty() ? static_cast<int>(options_.names.size())
                          : static_cast<int>(world_.size());
  }
  int rank() const { return rank_; }
  uint64_t generation() const { return generation_number_; }
  // Buckets whose allreduce started before Step() was called, in total.
  int64_t buckets_started_early() const { return early_.load(); }

  // Training stops early (SIGTERM): rank 0 with a checkpoint directory
  // writes a checkpoint of `params` at `step` now (CheckpointPolicy's
  // WriteNow: its failure is returned); other ranks return "". With NCCL,
  // where the update is queued before the step's collectives are seen to
  // finish, it first waits for the communication thread to see the last
  // step's, and refuses (Aborted) when they failed: the parameters may then
  // hold a partial sum, and the newest periodic checkpoint stands.
  absl::StatusOr<std::string> CheckpointNow(int64_t step, std::span<const float> params) override
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The ring: connected to the neighbours of this generation.
  absl::Status ConnectRing(const v1::JoinResponse& world, exchange::TcpListener& listener);
  // Joins the rendezvous for a generation, connects it and takes the
  // newest state (state_step: this rank's, -1 for none); returns the step
  // to run next.
  // How far a FormWorld got: a failed join waited the whole
  // --rendezvous-timeout (or was refused); a failed broadcast may have
  // overwritten part of a receiving rank's state.
  enum class FormStage { kJoin, kConnect, kBroadcast, kFormed };
  absl::StatusOr<int64_t> FormWorld(std::span<float> params, int64_t state_step,
                                    uint64_t last_generation, FormStage* stage);
  // After `why` ended the generation in Step: tears it down and forms the
  // next one (again while forming it fails past the join), or returns `why`
  // without `reform` or once this rank leaves.
  absl::StatusOr<int64_t> Reform(std::span<float> params, int64_t state_step, absl::Status why);
  // Stops the communication thread and closes the generation's links.
  void TearDown() ABSL_LOCKS_EXCLUDED(mu_, count_mu_);
  // Buffers the mode needs, allocated once.
  absl::Status AllocateBuffers(size_t params);
  // Parameters, optimizer state and the step <- rank `root`'s (rank 0's
  // newest checkpoint first when `load_checkpoint`).
  absl::Status BroadcastState(std::span<float> params, int64_t* step, int root,
                              bool load_checkpoint);
  // data <- rank `root`'s, for spans in the device's memory.
  absl::Status BroadcastDeviceSpan(std::span<float> data, int root);
  // A checkpoint's contents: the parameters and optimizer state, copied
  // into `host` first when they are in a device's memory.
  absl::Status FillCheckpoint(int64_t step, std::span<const float> params,
                              std::vector<std::vector<float>>& host,
                              exchange::CheckpointContents& c);
  // Step's host part after its update: a checkpoint when one is due, and
  // at the last step.
  absl::StatusOr<int64_t> AfterUpdate(int64_t step, std::span<const float> params);
  void CommLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // What wakes the communication thread: stop_, or work handed to it.
  bool CommWorkLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A watched join failed, or the thread has seen the last handed-over
  // join finish (kDevice).
  bool JoinWatchedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The ring: sums bucket `b` (number `index`) of the step in host memory.
  absl::Status ReduceBucket(const Bucket& b, int index, const float* grads);
  // NCCL: waits for the collectives of join `join`, the first `started`
  // collectives of this rank.
  absl::Status WatchJoin(int64_t join, int64_t started) ABSL_LOCKS_EXCLUDED(count_mu_);
  // Runs one collective (counted) with stall detection; on failure, the
  // reason every rank gives for the lost peer.
  absl::Status RunCollective(const std::function<absl::Status(const exchange::IoCheck&)>& op)
      ABSL_LOCKS_EXCLUDED(mu_, count_mu_);
  // The same without counting (a wait for collectives counted as queued).
  absl::Status Watch(const std::function<absl::Status(const exchange::IoCheck&)>& op)
      ABSL_LOCKS_EXCLUDED(mu_, count_mu_);
  absl::Status StallCheck(double started_at, double* next_warning) ABSL_LOCKS_EXCLUDED(count_mu_);
  // Starts buckets [launched_, count) of the step whose gradient is grads.
  void Launch(int count, const float* grads) ABSL_LOCKS_EXCLUDED(mu_, count_mu_);
  // A collective (or a watched join) started / finished, for the
  // rendezvous heartbeats and the stall check. The communication thread
  // and the trainer's both count.
  // "worker-1 (rank 1, 10.0.0.5:2222)": whom a loss names.
  std::string PeerLabel(int rank) const;
  void CountStarted() ABSL_LOCKS_EXCLUDED(count_mu_);
  void CountFinished() ABSL_LOCKS_EXCLUDED(count_mu_);

  enum class Mode {
    kSolo,        // one rank: no collectives
    kHostRing,    // the ring on the tensors' own host memory
    kStagedRing,  // the ring on pinned host copies of device tensors
    kDevice,      // a DeviceCollective (NCCL)
  };

  // Threads: the trainer's (every public method but Leave), the
  // communication thread (CommLoop), the ring's sender thread (the IoCheck
  // of Watch) and a signal watcher's (Leave). Fields below without an
  // annotation are set by Start before the communication thread starts, or
  // used by the trainer's thread alone; the buffers and the ring are handed
  // to the communication thread bucket by bucket through mu_.
  const AllreduceExchangeOptions options_;
  const optim::LrSchedule schedule_;
  const Clock& clock_;
  const std::function<void(const std::string&)> log_;
  const uint64_t incarnation_;
  std::string backend_;
  Mode mode_ = Mode::kSolo;  // set by Start; the communication thread reads it
  bool finished_ = false;    // Finish succeeded

  // This rank in the current generation, the generation (rank order), and
  // its number (0 before the first).
  int rank_ = 0;
  std::string name_;  // this replica's, "worker-1"
  std::vector<v1::RankInfo> world_;
  uint64_t generation_number_ = 0;
  // The generation's members that joined, left and were lost since the one
  // before (the rendezvous' counts).
  std::array<int, 3> changes_ = {0, 0, 0};
  // The trainer's data position before the step in flight, and the one the
  // state taken at the last formed generation carries (nullopt: unknown,
  // derive it from the step).
  int64_t position_step_ = -1;
  exchange::DataPosition position_, position_after_;
  // The data position that goes with a state at `step` (before step
  // `step` runs), where the trainer said it.
  std::optional<exchange::DataPosition> PositionAt(int64_t step) const;
  std::optional<exchange::DataPosition> taken_;
  bool on_gpu_ = false;
  bool nccl_compiled_ = false;
  bool test_collective_ = false;
  // Set by Leave (any thread): a failing step fails, no re-forming.
  std::atomic<bool> leaving_{false};
  // The data-plane listener, kept from one generation to the next (the
  // address the rendezvous hands out).
  exchange::TcpListener listener_;
  std::unique_ptr<ComputeDevice> own_device_;  // when options_.device is null
  ComputeDevice* device_ = nullptr;
  std::unique_ptr<RendezvousServer> server_;
  std::unique_ptr<RendezvousClient> client_;
  std::unique_ptr<Collective> ring_;
  std::unique_ptr<DeviceCollective> device_collective_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<BucketPlan> plan_;
  DeviceBuffer reduced_;  // the summed gradient, in the device's memory (not kSolo)
  DeviceBuffer scalars_;  // 8 floats of device memory: the broadcast meta, the final barrier
  DeviceBuffer staging_;  // kStagedRing: pinned host memory the ring sums in
  std::vector<std::unique_ptr<DeviceEvent>> bucket_staged_;  // kStagedRing: per bucket
  exchange::CheckpointPolicy checkpoints_;                   // rank 0's
  std::atomic<int64_t> early_{0};  // atomic: read by buckets_started_early() from any thread
  absl::Mutex joined_mu_;
  // Leave reads client_ and server_ once this is true: Start set them before.
  bool joined_ ABSL_GUARDED_BY(joined_mu_) = false;
  // Leave's reason, told the rendezvous as this rank goes (an elastic
  // world's leaver finishes its step first).
  std::string leave_reason_ ABSL_GUARDED_BY(joined_mu_);
  // Each rank's data address, from the rendezvous (written by Start
  // before the communication thread runs).
  std::vector<std::string> addresses_;
  absl::Mutex count_mu_;  // taken inside mu_ (Step), never the other way round
  int64_t collectives_started_ ABSL_GUARDED_BY(count_mu_) = 0;
  int64_t collectives_finished_ ABSL_GUARDED_BY(count_mu_) = 0;

  // Communication thread: the ring's buckets, or the NCCL joins it watches.
  // Started by Start, joined by the destructor (the trainer's thread).
  std::thread comm_;
  absl::Mutex mu_;
  absl::CondVar cv_;  // with mu_: any field below changed
  const float* grads_ ABSL_GUARDED_BY(mu_) = nullptr;
  int launched_ ABSL_GUARDED_BY(mu_) = 0;           // buckets handed to the thread this step
  int done_ ABSL_GUARDED_BY(mu_) = 0;               // buckets it finished this step
  int64_t join_to_watch_ ABSL_GUARDED_BY(mu_) = 0;  // kDevice: the last join handed to the thread
  int64_t join_watched_ ABSL_GUARDED_BY(mu_) = 0;   // kDevice: the last join it saw finish
  // kDevice: collectives queued before join_to_watch_.
  int64_t join_started_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // First failure this step (kDevice: of any watched join).
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kubetrain::allreduce

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_ALLREDUCE_ALLREDUCE_EXCHANGE_H_
