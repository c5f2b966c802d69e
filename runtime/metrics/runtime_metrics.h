// RuntimeMetrics: the Prometheus metrics of one `kubetrain train` replica.
// Owns a prometheus::Registry (serve it with MetricsServer) and holds cached
// references to every series, so recording on the hot path is a few atomic
// adds: no lookups, no allocation, no locks beyond prometheus-cpp's own.
//
// Which families exist depends on the replica's role (RuntimeMetricsOptions):
// a worker does not export parameter-server gauges and vice versa. Recording
// into a family the role did not register is a no-op, so callers need not
// check. Components take a `RuntimeMetrics*` that may be nullptr (metrics
// off, unit tests).
//
// Thread-safe: every method may be called from any thread.
#ifndef KUBETRAIN_RUNTIME_METRICS_RUNTIME_METRICS_H_
#define KUBETRAIN_RUNTIME_METRICS_RUNTIME_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/labels.h>
#include <prometheus/registry.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "runtime/metrics/metric_names.h"

namespace kubetrain::metrics {

// Whom bytes went to / came from, or who restarted.
enum class PeerRole { kPs = 0, kWorker = 1, kEvaluator = 2 };
inline constexpr int kNumPeerRoles = 3;
const char* PeerRoleName(PeerRole role);

enum class ExchangeOp { kPush = 0, kPull = 1, kAllreduce = 2 };
inline constexpr int kNumExchangeOps = 3;
const char* ExchangeOpName(ExchangeOp op);

// Why a parameter server refused a push (the `reason` label).
enum class RejectReason {
  kBadHeader = 0,      // stream without a header
  kUnknownWorker = 1,  // worker id outside the cluster
  kBadRange = 2,       // chunks do not tile the shard's range
  kBadChunk = 3,       // checksum or encoding failure
  kFutureStep = 4,     // a step the shard has not reached
  kNonFinite = 5,      // NaN or Inf values
  kBadToken = 6,       // missing or wrong job token (another job's worker)
};
inline constexpr int kNumRejectReasons = 7;
const char* RejectReasonName(RejectReason reason);

struct RuntimeMetricsOptions {
  prometheus::Labels constant_labels;  // on every series
  bool training = false;               // runs training steps (chief, worker, single process)
  bool evaluates = false;              // reports test accuracy (chief, evaluator, single process)
  bool ps_client = false;              // exchanges with parameter servers (workers)
  bool ps_server = false;              // serves a parameter-server shard
  bool allreduce = false;              // exchanges by allreduce with other workers
  bool writes_checkpoints = false;     // allreduce rank 0 (a PS always does)
  // Unix time of the process start, for kubetrain_start_time_seconds.
  double start_time_unix_seconds = 0;
};

// What the trainer records for every step.
struct StepRecord {
  double step_seconds = 0;
  double compute_seconds = 0;
  double exchange_seconds = 0;
  int64_t samples = 0;
  int64_t global_step = 0;
};

class RuntimeMetrics {
 public:
  explicit RuntimeMetrics(const RuntimeMetricsOptions& options);
  RuntimeMetrics(const RuntimeMetrics&) = delete;
  RuntimeMetrics& operator=(const RuntimeMetrics&) = delete;

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // Training: every step, then about once a second (window means).
  void RecordStep(const StepRecord& r);
  void SetTrainingWindow(double loss, double accuracy, double samples_per_second,
                         double learning_rate);
  void SetTotalSteps(int64_t steps);
  void SetGlobalStep(int64_t step);
  void SetEvaluation(double loss, double accuracy);

  // Exchange: one call with one peer.
  void RecordExchange(ExchangeOp op, PeerRole peer, double seconds, int64_t sent_bytes,
                      int64_t received_bytes);
  // Bytes moved outside a timed call (the PS's side of pushes and pulls).
  void AddSentBytes(PeerRole peer, int64_t bytes);
  void AddReceivedBytes(PeerRole peer, int64_t bytes);
  void AddPeerRestart(PeerRole peer);
  void SetStalledPeers(int n);
  void SetAllreduceStallSeconds(double seconds);
  // Allreduce membership: the world this rank trains in now, its members
  // (exported by rank 0 only: `members` empty elsewhere), and what changed
  // when it formed.
  void SetWorld(int size, uint64_t generation, const std::vector<std::string>& members);
  enum class MembershipChange { kJoined, kLeft, kLost };
  void AddMembershipChanges(MembershipChange change, int count);

  // Parameter server.
  void SetWorkersConnected(int n);
  void AddRejectedPush(RejectReason reason);
  void RecordStaleness(int64_t steps);
  void RecordCheckpoint(double seconds);
  void AddCheckpointFailure();

  // GPU memory in use on `device` ("cuda:0"); creates the series on first
  // use, so CPU-only replicas never export it.
  void SetGpuMemoryUsed(const std::string& device, int64_t bytes);

 private:
  prometheus::Family<prometheus::Counter>& CounterFamily(const MetricName& m);
  prometheus::Family<prometheus::Gauge>& GaugeFamily(const MetricName& m);
  prometheus::Family<prometheus::Histogram>& HistogramFamily(const MetricName& m);

  const prometheus::Labels constant_labels_;
  std::shared_ptr<prometheus::Registry> registry_;

  // nullptr: not exported by this role.
  prometheus::Counter* steps_ = nullptr;
  prometheus::Counter* samples_ = nullptr;
  prometheus::Histogram* step_duration_ = nullptr;
  prometheus::Histogram* compute_duration_ = nullptr;
  prometheus::Histogram* exchange_phase_duration_ = nullptr;
  prometheus::Gauge* loss_ = nullptr;
  prometheus::Gauge* accuracy_ = nullptr;
  prometheus::Gauge* learning_rate_ = nullptr;
  prometheus::Gauge* samples_per_second_ = nullptr;
  prometheus::Gauge* global_step_ = nullptr;
  prometheus::Gauge* world_size_ = nullptr;
  prometheus::Gauge* world_generation_ = nullptr;
  prometheus::Family<prometheus::Gauge>* world_members_ = nullptr;
  std::map<std::string, prometheus::Gauge*> world_member_;  // by member
  prometheus::Counter* membership_changes_[3] = {nullptr, nullptr, nullptr};
  prometheus::Gauge* total_steps_ = nullptr;
  prometheus::Gauge* eval_loss_ = nullptr;
  prometheus::Gauge* eval_accuracy_ = nullptr;
  std::array<prometheus::Histogram*, kNumExchangeOps> exchange_duration_{};
  std::array<prometheus::Counter*, kNumPeerRoles> sent_bytes_{};
  std::array<prometheus::Counter*, kNumPeerRoles> received_bytes_{};
  std::array<prometheus::Counter*, kNumPeerRoles> peer_restarts_{};
  prometheus::Gauge* stalled_peers_ = nullptr;
  prometheus::Gauge* allreduce_stall_ = nullptr;
  prometheus::Gauge* workers_connected_ = nullptr;
  std::array<prometheus::Counter*, kNumRejectReasons> rejected_{};
  prometheus::Histogram* staleness_ = nullptr;
  prometheus::Counter* checkpoints_ = nullptr;
  prometheus::Histogram* checkpoint_duration_ = nullptr;
  prometheus::Counter* checkpoint_failures_ = nullptr;

  absl::Mutex gpu_mu_;
  prometheus::Family<prometheus::Gauge>* gpu_family_ ABSL_GUARDED_BY(gpu_mu_) = nullptr;
  absl::flat_hash_map<std::string, prometheus::Gauge*> gpu_memory_ ABSL_GUARDED_BY(gpu_mu_);
};

}  // namespace kubetrain::metrics

#endif  // KUBETRAIN_RUNTIME_METRICS_RUNTIME_METRICS_H_
