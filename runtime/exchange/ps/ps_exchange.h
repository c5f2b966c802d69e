// PsExchange: the Exchange of a worker in parameter-server mode. Talks to
// every shard in parallel: each step pushes the shard's slice of the flat
// gradient and pulls the shard's slice of the parameters back (waiting at
// the sync barrier or the ssp bound on the server side) in one round trip
// on a step transport (step_transport.h), chosen per shard from one ordered
// list: the shard's direct TCP data plane when it offers one and
// `data_plane` allows, else its gRPC PushPull stream. Registration,
// initialisation and a pull without a push (the first parameters, a retry
// after a committed push) are ShardClient calls.
//
// Faults: an unreachable shard is retried with backoff (reconnects within
// ~1 s of it coming back; "waiting for ps-1 to come back" logged every
// 10 s); a shard that restarted (new incarnation) is re-registered and the
// worker resumes at the step the shard restored ("ps-1 restarted: resumed
// from its checkpoint at step N"). A shard that came back empty is
// re-initialised from the parameters the workers hold for it (their last
// pull): by the initialiser at the job's start, afterwards by whichever
// worker registers first (the shard takes the first Initialize and
// ignores the rest; every worker then continues from the step the winner
// gave, "re-initialised from worker-0's parameters at step N"). A shard
// unreachable for longer than `peer_timeout_seconds` ends the step with
// Unavailable naming it; a shard that gave up on a lost peer ends it with
// Aborted.
//
// Elastic workers: a worker whose id the shards' cluster spec did not list
// joins by registering (Start) and continues from the shards' step; Leave
// tells every shard this worker leaves, so sync rounds stop waiting for it.
//
// Not thread-safe: one trainer thread, except Leave (any thread, e.g. a
// signal watcher). The logger is called from the shards' threads, one line
// at a time.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_EXCHANGE_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_EXCHANGE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "kubetrain/v1/tensor.pb.h"
#include "runtime/exchange/exchange.h"
#include "runtime/exchange/ps/exchange_mode.h"
#include "runtime/exchange/ps/shard_client.h"
#include "runtime/exchange/ps/shard_range.h"
#include "runtime/exchange/ps/step_transport.h"
#include "runtime/metrics/runtime_metrics.h"

namespace kubetrain::ps {

struct PsExchangeOptions {
  std::vector<std::string> ps_addresses;  // shard i at ps_addresses[i]
  int worker = 0;                         // training replica id (chief 0)
  std::string worker_name = "worker-0";
  bool initializer = false;  // chief, or worker 0 without a chief
  ExchangeMode mode;
  v1::WireDType wire_dtype = v1::WIRE_DTYPE_F32;
  // Steps may go over a shard's direct TCP data plane when it offers one
  // (--ps-data-plane tcp); false: always gRPC (--ps-data-plane grpc).
  bool data_plane = true;
  std::string token;
  double peer_timeout_seconds = 120;
  int64_t total_steps = 0;  // updates the whole job applies (for LR schedules)
  // Borrowed; nullptr records nothing. Gets push/pull durations and bytes,
  // shard restarts seen and shards currently unreachable.
  metrics::RuntimeMetrics* metrics = nullptr;
};

class PsExchange final : public exchange::Exchange {
 public:
  using Logger = std::function<void(const std::string&)>;
  PsExchange(PsExchangeOptions options, const Clock& clock, Logger log);
  ~PsExchange() override;

  std::string name() const override { return "ps:" + opt_.mode.ToString(); }
  absl::StatusOr<int64_t> Start(std::span<float> params) override;
  absl::StatusOr<int64_t> Step(int64_t step, std::span<const float> grads,
                               std::span<float> params) override;
  absl::Status Finish() override;
  // This worker leaves the running job (SIGTERM, scale-down): tells every
  // shard (DoneRequest.leaving, `reason` in their logs; each call bounded
  // by a few seconds), and from then on a failed step returns its error at
  // once instead of waiting for a shard to come back. Safe from any thread
  // while the trainer's thread is in Step.
  void Leave(const std::string& reason);

  // The last global step any shard reported.
  int64_t global_step() const { return global_step_; }
  // The transport shard i's last step was given to (tests); nullopt before
  // its first step.
  std::optional<StepTransportKind> transport(int shard) const;

 private:
  struct Shard {
    std::unique_ptr<ShardClient> client;
    // The step transports, in order of preference (ChooseTransport); they
    // borrow `client`.
    std::vector<std::unique_ptr<StepTransport>> transports;
    StepTransport* chosen = nullptr;  // the last choice, one of `transports`
    uint64_t incarnation = 0;         // 0: must (re-)register
    uint64_t last_incarnation = 0;    // the last one registered with (restart detection)
    Range range;
    int64_t resume_clock = 0;  // from the last registration
    int64_t global_step = 0;
  };

  // Registers shard i (retrying until the peer timeout), initialising it
  // from `params` when it is empty and this worker initialises.
  absl::Status RegisterShard(Shard& s, std::span<float> params, int64_t clock);
  // The first of the shard's transports that can carry its steps now;
  // logs the choice when it changes.
  StepTransport& ChooseTransport(Shard& s);
  // One step on one shard; returns the clock to continue from.
  absl::StatusOr<int64_t> ShardStep(Shard& s, int64_t clock, std::span<const float> grads,
                                    std::span<float> params, bool push);
  // Runs fn on every shard, in parallel when there are several.
  absl::StatusOr<int64_t> ForAllShards(const std::function<absl::StatusOr<int64_t>(Shard&)>& fn);

  // Calls the logger, one line at a time (shards step on threads of their own).
  void Log(const std::string& line) ABSL_LOCKS_EXCLUDED(log_mu_);

  PsExchangeOptions opt_;
  const Clock& clock_;
  absl::Mutex log_mu_;
  Logger log_ ABSL_GUARDED_BY(log_mu_);
  std::vector<Shard> shards_;
  int64_t num_params_ = 0;
  int64_t global_step_ = 0;
  std::atomic<int> lost_shards_{0};  // shards being reconnected to, for the metrics
  // Start has pulled every shard's parameters: this worker holds values it
  // can re-initialise a shard that came back empty with. Trainer thread.
  bool started_ = false;
  std::atomic<bool> leaving_{false};  // Leave was called (any thread)
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_EXCHANGE_H_
