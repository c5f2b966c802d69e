// PsExchange: the Exchange of a worker in parameter-server mode. Talks to
// every shard in parallel: pushes the shard's slice of the flat gradient,
// then pulls the shard's slice of the parameters (waiting at the sync
// barrier or the ssp bound on the server side), both on the shard's
// PushPull stream, which stays open from step to step (a shard without
// PushPull gets a Push call and a Pull call per step).
//
// Faults: an unreachable shard is retried with backoff (reconnects within
// ~1 s of it coming back); a shard that restarted (new incarnation) is
// re-registered and the worker resumes at the step the shard restored,
// re-initialising it first when it came back empty and this worker is the
// initialiser. A shard unreachable for longer than `peer_timeout_seconds`
// ends the step with Unavailable naming it; a shard that gave up on a lost
// peer ends it with Aborted. Not thread-safe: one trainer thread.
#ifndef KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_EXCHANGE_H_
#define KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_EXCHANGE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "kubetrain/v1/tensor.pb.h"
#include "runtime/exchange/exchange.h"
#include "runtime/exchange/ps/exchange_mode.h"
#include "runtime/exchange/ps/ps_client.h"
#include "runtime/exchange/ps/shard_range.h"
#include "runtime/metrics/runtime_metrics.h"

namespace kubetrain::ps {

struct PsExchangeOptions {
  std::vector<std::string> ps_addresses;  // shard i at ps_addresses[i]
  int worker = 0;                         // training replica id (chief 0)
  std::string worker_name = "worker-0";
  bool initializer = false;  // chief, or worker 0 without a chief
  ExchangeMode mode;
  v1::WireDType wire_dtype = v1::WIRE_DTYPE_F32;
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

  // The last global step any shard reported.
  int64_t global_step() const { return global_step_; }

 private:
  struct Shard {
    std::unique_ptr<PsShardClient> client;
    uint64_t incarnation = 0;       // 0: must (re-)register
    uint64_t last_incarnation = 0;  // the last one registered with (restart detection)
    Range range;
    int64_t resume_clock = 0;  // from the last registration
    int64_t global_step = 0;
    bool push_pull = true;  // false: the shard has no PushPull (Push, then Pull)
  };

  // Registers shard i (retrying until the peer timeout), initialising it
  // from `params` when it is empty and this worker initialises.
  absl::Status RegisterShard(Shard& s, std::span<float> params, int64_t clock);
  // One step on one shard; returns the clock to continue from.
  absl::StatusOr<int64_t> ShardStep(Shard& s, int64_t clock, std::span<const float> grads,
                                    std::span<float> params, bool push);
  // Runs fn on every shard, in parallel when there are several.
  absl::StatusOr<int64_t> ForAllShards(const std::function<absl::StatusOr<int64_t>(Shard&)>& fn);

  PsExchangeOptions opt_;
  const Clock& clock_;
  Logger log_;
  std::vector<Shard> shards_;
  int64_t num_params_ = 0;
  int64_t global_step_ = 0;
  std::atomic<int> lost_shards_{0};  // shards being reconnected to, for the metrics
};

}  // namespace kubetrain::ps

#endif  // KUBETRAIN_RUNTIME_EXCHANGE_PS_PS_EXCHANGE_H_
