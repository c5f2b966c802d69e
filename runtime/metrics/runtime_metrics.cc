#include "runtime/metrics/runtime_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

#include <algorithm>

#include "api/metric_names.h"
#include "runtime/metrics/metric_names.h"

namespace kubetrain::metrics {
namespace {

// Seconds, from half a millisecond (an mlp step) to a minute.
prometheus::Histogram::BucketBoundaries DurationBuckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

prometheus::Histogram::BucketBoundaries StalenessBuckets() {
  return {0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128};
}

prometheus::Histogram::BucketBoundaries CheckpointBuckets() {
  return {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
}

}  // namespace

const char* PeerRoleName(PeerRole role) {
  switch (role) {
    case PeerRole::kPs:
      return "ps";
    case PeerRole::kWorker:
      return "worker";
    case PeerRole::kEvaluator:
      return "evaluator";
  }
  return "unknown";
}

const char* ExchangeOpName(ExchangeOp op) {
  switch (op) {
    case ExchangeOp::kPush:
      return "push";
    case ExchangeOp::kPull:
      return "pull";
    case ExchangeOp::kAllreduce:
      return "allreduce";
  }
  return "unknown";
}

const char* RejectReasonName(RejectReason reason) {
  switch (reason) {
    case RejectReason::kBadHeader:
      return "bad_header";
    case RejectReason::kUnknownWorker:
      return "unknown_worker";
    case RejectReason::kBadRange:
      return "bad_range";
    case RejectReason::kBadChunk:
      return "bad_chunk";
    case RejectReason::kFutureStep:
      return "future_step";
    case RejectReason::kNonFinite:
      return "non_finite";
    case RejectReason::kBadToken:
      return "bad_token";
  }
  return "unknown";
}

prometheus::Family<prometheus::Counter>& RuntimeMetrics::CounterFamily(const MetricName& m) {
  return prometheus::BuildCounter()
      .Name(m.name)
      .Help(m.help)
      .Labels(constant_labels_)
      .Register(*registry_);
}

prometheus::Family<prometheus::Gauge>& RuntimeMetrics::GaugeFamily(const MetricName& m) {
  return prometheus::BuildGauge()
      .Name(m.name)
      .Help(m.help)
      .Labels(constant_labels_)
      .Register(*registry_);
}

prometheus::Family<prometheus::Histogram>& RuntimeMetrics::HistogramFamily(const MetricName& m) {
  return prometheus::BuildHistogram()
      .Name(m.name)
      .Help(m.help)
      .Labels(constant_labels_)
      .Register(*registry_);
}

RuntimeMetrics::RuntimeMetrics(const RuntimeMetricsOptions& o)
    : constant_labels_(o.constant_labels), registry_(std::make_shared<prometheus::Registry>()) {
  GaugeFamily(kStartTime).Add({}).Set(o.start_time_unix_seconds);
  if (o.training) {
    steps_ = &CounterFamily(kSteps).Add({});
    samples_ = &CounterFamily(kSamples).Add({});
    step_duration_ = &HistogramFamily(kStepDuration).Add({}, DurationBuckets());
    auto& phase = HistogramFamily(kStepPhaseDuration);
    compute_duration_ = &phase.Add({{kLabelPhase, "compute"}}, DurationBuckets());
    exchange_phase_duration_ = &phase.Add({{kLabelPhase, "exchange"}}, DurationBuckets());
    loss_ = &GaugeFamily(kTrainLoss).Add({});
    accuracy_ = &GaugeFamily(kTrainAccuracy).Add({});
    learning_rate_ = &GaugeFamily(kLearningRate).Add({});
    samples_per_second_ = &GaugeFamily(kSamplesPerSecond).Add({});
    total_steps_ = &GaugeFamily(kTotalSteps).Add({});
  }
  if (o.training || o.evaluates || o.ps_server) {
    global_step_ = &GaugeFamily(kGlobalStep).Add({});
  }
  if (o.evaluates) {
    eval_loss_ = &GaugeFamily(kEvalLoss).Add({});
    eval_accuracy_ = &GaugeFamily(kEvalAccuracy).Add({});
  }
  if (o.ps_client || o.ps_server || o.allreduce) {
    auto& sent = CounterFamily(kExchangeSentBytes);
    auto& received = CounterFamily(kExchangeReceivedBytes);
    auto& restarts = CounterFamily(kPeerRestarts);
    // A worker's peers are parameter servers; a PS's are workers and
    // evaluators.
    std::vector<PeerRole> peers;
    if (o.ps_client) peers.push_back(PeerRole::kPs);
    if (o.ps_server) peers.insert(peers.end(), {PeerRole::kWorker, PeerRole::kEvaluator});
    if (o.allreduce) peers.push_back(PeerRole::kWorker);
    for (PeerRole p : peers) {
      const int i = static_cast<int>(p);
      const prometheus::Labels l = {{kLabelPeerRole, PeerRoleName(p)}};
      sent_bytes_[i] = &sent.Add(l);
      received_bytes_[i] = &received.Add(l);
      if (p != PeerRole::kEvaluator) peer_restarts_[i] = &restarts.Add(l);
    }
    stalled_peers_ = &GaugeFamily(kStalledPeers).Add({});
  }
  if (o.ps_client || o.allreduce) {
    auto& d = HistogramFamily(kExchangeDuration);
    std::vector<ExchangeOp> ops;
    if (o.ps_client) ops = {ExchangeOp::kPush, ExchangeOp::kPull};
    if (o.allreduce) ops.push_back(ExchangeOp::kAllreduce);
    for (ExchangeOp op : ops) {
      exchange_duration_[static_cast<int>(op)] =
          &d.Add({{kLabelOp, ExchangeOpName(op)}}, DurationBuckets());
    }
  }
  if (o.allreduce) {
    allreduce_stall_ = &GaugeFamily(kAllreduceStallSeconds).Add({});
    world_size_ = &GaugeFamily(kWorldSize).Add({});
    world_generation_ = &GaugeFamily(kWorldGeneration).Add({});
    world_members_ = &GaugeFamily(kWorldMember);
    auto& changes = CounterFamily(kMembershipChanges);
    const char* kinds[3] = {"joined", "left", "lost"};
    for (int i = 0; i < 3; ++i) {
      membership_changes_[i] = &changes.Add({{api::kMetricLabelChange, kinds[i]}});
    }
  }
  if (o.ps_server) {
    workers_connected_ = &GaugeFamily(kWorkersConnected).Add({});
    auto& rejected = CounterFamily(kRejectedPushes);
    for (int i = 0; i < kNumRejectReasons; ++i) {
      rejected_[i] =
          &rejected.Add({{kLabelReason, RejectReasonName(static_cast<RejectReason>(i))}});
    }
    staleness_ = &HistogramFamily(kStaleness).Add({}, StalenessBuckets());
  }
  if (o.ps_server || o.writes_checkpoints) {
    checkpoints_ = &CounterFamily(kCheckpointsWritten).Add({});
    checkpoint_duration_ = &HistogramFamily(kCheckpointDuration).Add({}, CheckpointBuckets());
    checkpoint_failures_ = &CounterFamily(kCheckpointFailures).Add({});
  }
}

void RuntimeMetrics::RecordStep(const StepRecord& r) {
  if (steps_ == nullptr) return;
  steps_->Increment();
  samples_->Increment(static_cast<double>(r.samples));
  step_duration_->Observe(r.step_seconds);
  compute_duration_->Observe(r.compute_seconds);
  exchange_phase_duration_->Observe(r.exchange_seconds);
  global_step_->Set(static_cast<double>(r.global_step));
}

void RuntimeMetrics::SetTrainingWindow(double loss, double accuracy, double samples_per_second,
                                       double learning_rate) {
  if (loss_ == nullptr) return;
  loss_->Set(loss);
  accuracy_->Set(accuracy);
  samples_per_second_->Set(samples_per_second);
  learning_rate_->Set(learning_rate);
}

void RuntimeMetrics::SetTotalSteps(int64_t steps) {
  if (total_steps_ != nullptr) total_steps_->Set(static_cast<double>(steps));
}

void RuntimeMetrics::SetGlobalStep(int64_t step) {
  if (global_step_ != nullptr) global_step_->Set(static_cast<double>(step));
}

void RuntimeMetrics::SetEvaluation(double loss, double accuracy) {
  if (eval_loss_ == nullptr) return;
  eval_loss_->Set(loss);
  eval_accuracy_->Set(accuracy);
}

void RuntimeMetrics::RecordExchange(ExchangeOp op, PeerRole peer, double seconds,
                                    int64_t sent_bytes, int64_t received_bytes) {
  if (prometheus::Histogram* h = exchange_duration_[static_cast<int>(op)]; h != nullptr) {
    h->Observe(seconds);
  }
  if (sent_bytes > 0) AddSentBytes(peer, sent_bytes);
  if (received_bytes > 0) AddReceivedBytes(peer, received_bytes);
}

void RuntimeMetrics::AddSentBytes(PeerRole peer, int64_t bytes) {
  if (prometheus::Counter* c = sent_bytes_[static_cast<int>(peer)]; c != nullptr) {
    c->Increment(static_cast<double>(bytes));
  }
}

void RuntimeMetrics::AddReceivedBytes(PeerRole peer, int64_t bytes) {
  if (prometheus::Counter* c = received_bytes_[static_cast<int>(peer)]; c != nullptr) {
    c->Increment(static_cast<double>(bytes));
  }
}

void RuntimeMetrics::AddPeerRestart(PeerRole peer) {
  if (prometheus::Counter* c = peer_restarts_[static_cast<int>(peer)]; c != nullptr) {
    c->Increment();
  }
}

void RuntimeMetrics::SetStalledPeers(int n) {
  if (stalled_peers_ != nullptr) stalled_peers_->Set(n);
}

void RuntimeMetrics::SetAllreduceStallSeconds(double seconds) {
  if (allreduce_stall_ != nullptr) allreduce_stall_->Set(seconds);
}

void RuntimeMetrics::SetWorld(int size, uint64_t generation,
                              const std::vector<std::string>& members) {
  if (world_size_ == nullptr) return;
  world_size_->Set(size);
  world_generation_->Set(static_cast<double>(generation));
  for (auto& [name, gauge] : world_member_) gauge->Set(0);
  for (auto it = world_member_.begin(); it != world_member_.end();) {
    if (std::find(members.begin(), members.end(), it->first) == members.end()) {
      world_members_->Remove(it->second);
      it = world_member_.erase(it);
    } else {
      ++it;
    }
  }
  for (const std::string& m : members) {
    auto [it, added] = world_member_.try_emplace(m, nullptr);
    if (added) it->second = &world_members_->Add({{api::kMetricLabelMember, m}});
    it->second->Set(1);
  }
}

void RuntimeMetrics::AddMembershipChanges(MembershipChange change, int count) {
  if (prometheus::Counter* c = membership_changes_[static_cast<int>(change)];
      c != nullptr && count > 0) {
    c->Increment(count);
  }
}

void RuntimeMetrics::SetWorkersConnected(int n) {
  if (workers_connected_ != nullptr) workers_connected_->Set(n);
}

void RuntimeMetrics::AddRejectedPush(RejectReason reason) {
  if (prometheus::Counter* c = rejected_[static_cast<int>(reason)]; c != nullptr) c->Increment();
}

void RuntimeMetrics::RecordStaleness(int64_t steps) {
  if (staleness_ != nullptr) staleness_->Observe(static_cast<double>(std::max<int64_t>(steps, 0)));
}

void RuntimeMetrics::RecordCheckpoint(double seconds) {
  if (checkpoints_ == nullptr) return;
  checkpoints_->Increment();
  checkpoint_duration_->Observe(seconds);
}

void RuntimeMetrics::AddCheckpointFailure() {
  if (checkpoint_failures_ != nullptr) checkpoint_failures_->Increment();
}

void RuntimeMetrics::SetGpuMemoryUsed(const std::string& device, int64_t bytes) {
  absl::MutexLock lock(&gpu_mu_);
  if (gpu_family_ == nullptr) gpu_family_ = &GaugeFamily(kGpuMemoryUsed);
  prometheus::Gauge*& g = gpu_memory_[device];
  if (g == nullptr) g = &gpu_family_->Add({{kLabelDevice, device}});
  g->Set(static_cast<double>(bytes));
}

}  // namespace kubetrain::metrics
