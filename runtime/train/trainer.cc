#include "runtime/train/trainer.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/data/batch_sampler.h"
#include "runtime/nn/softmax_cross_entropy.h"
#include "runtime/tensor/aligned_buffer.h"
#include "runtime/tensor/denormals.h"
#include "runtime/tensor/device_buffer.h"

namespace kubetrain::train {

absl::StatusOr<EvalResult> Evaluate(nn::Model& model, const data::Dataset& ds, int64_t batch_size) {
  EvalResult r;
  const int64_t d = ds.SampleSize();
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t start = 0; start < ds.size(); start += batch_size) {
    const int64_t n = std::min(batch_size, ds.size() - start);
    TensorView logits = model.Forward(ds.features.data() + start * d, n, /*training=*/false);
    absl::StatusOr<nn::LossResult> lr =
        nn::SoftmaxCrossEntropy(model.device(), logits, ds.labels.data() + start, nullptr);
    if (!lr.ok()) return lr.status();
    loss_sum += lr->loss * static_cast<double>(n);
    correct += lr->correct;
  }
  r.samples = ds.size();
  if (r.samples > 0) {
    r.loss = loss_sum / static_cast<double>(r.samples);
    r.accuracy = static_cast<double>(correct) / static_cast<double>(r.samples);
  }
  return r;
}

absl::Status CheckDatasetFitsModel(const data::Dataset& ds, const nn::Model& model,
                                   const std::string& what) {
  if (ds.size() == 0) return absl::InvalidArgumentError(absl::StrCat(what, " data is empty"));
  if (ds.SampleSize() != NumElements(model.input_shape())) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " samples have shape ", ShapeToString(ds.sample_shape),
                     " but the model expects ", ShapeToString(model.input_shape())));
  }
  const Shape& out = model.output_shape();
  if (out.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("model output must be flat logits, got ", ShapeToString(out)));
  }
  const auto [lo, hi] = std::minmax_element(ds.labels.begin(), ds.labels.end());
  if (*lo < 0 || *hi >= out[0]) {
    return absl::InvalidArgumentError(absl::StrCat(what, " labels span [", *lo, ", ", *hi,
                                                   "] but the model has ", out[0],
                                                   " outputs (classes)"));
  }
  return absl::OkStatus();
}

std::vector<int64_t> SplitBatch(int64_t n, int replicas) {
  std::vector<int64_t> rows(static_cast<size_t>(std::max(replicas, 1)), 0);
  const int64_t r = static_cast<int64_t>(rows.size());
  for (int64_t i = 0; i < r; ++i) rows[static_cast<size_t>(i)] = n / r + (i < n % r ? 1 : 0);
  return rows;
}

namespace {

// The training data and this replica's batch order in the memory of a
// device that has its own (a GPU), so that a step gathers its batch there
// and copies nothing from the host.
struct ResidentData {
  DeviceBuffer features, labels;  // the whole training split
  DeviceBuffer order;             // int32: this shard's samples of `epoch`, batch after batch
  int64_t epoch = -1;
};

// The data on `device`: ResourceExhausted when it does not fit.
absl::StatusOr<ResidentData> MakeResident(ComputeDevice& device, const data::Dataset& ds,
                                          int64_t shard_size) {
  if (ds.size() >= (int64_t{1} << 31)) {
    return absl::ResourceExhaustedError("over 2^31 samples: indexed from the host");
  }
  ResidentData r;
  for (auto [buffer, bytes] :
       {std::pair{&r.features, ds.features.size() * sizeof(float)},
        std::pair{&r.labels, ds.labels.size() * sizeof(int32_t)},
        std::pair{&r.order, static_cast<size_t>(shard_size) * sizeof(int32_t)}}) {
    absl::StatusOr<DeviceBuffer> b = device.Allocate(bytes);
    if (!b.ok()) return b.status();
    *buffer = *std::move(b);
  }
  device.CopyToDevice(ds.features.data(), r.features.data(), ds.features.size() * sizeof(float));
  device.CopyToDevice(ds.labels.data(), r.labels.data(), ds.labels.size() * sizeof(int32_t));
  return r;
}

// Uploads the order of `epoch` (one copy an epoch): the batches a copy of
// `sampler` draws from that epoch's start.
void LoadEpochOrder(ComputeDevice& device, const data::BatchSampler& sampler, int64_t epoch,
                    ResidentData& r) {
  data::BatchSampler s = sampler;
  s.SetPosition(epoch, 0);
  std::vector<int32_t> order;
  order.reserve(static_cast<size_t>(s.ShardSize()));
  for (int64_t b = 0; b < s.BatchesPerEpoch(); ++b) {
    for (int64_t i : s.NextBatch()) order.push_back(static_cast<int32_t>(i));
  }
  device.CopyToDevice(order.data(), r.order.data(), order.size() * sizeof(int32_t));
  r.epoch = epoch;
}

// Loss and correct predictions summed over every sample so far.
struct LossTotals {
  double loss = 0, correct = 0;
  LossTotals operator-(const LossTotals& o) const { return {loss - o.loss, correct - o.correct}; }
};

}  // namespace

Trainer::Trainer(nn::Model& model, exchange::Exchange& exchange, const data::Dataset& train,
                 const data::Dataset* test, TrainerOptions options, ProgressReporter& progress,
                 const Clock& clock)
    : Trainer(PodReplicas{{&model}, nullptr}, exchange, train, test, std::move(options), progress,
              clock) {}

Trainer::Trainer(PodReplicas pod, exchange::Exchange& exchange, const data::Dataset& train,
                 const data::Dataset* test, TrainerOptions options, ProgressReporter& progress,
                 const Clock& clock)
    : pod_(std::move(pod)),
      model_(*pod_.models.at(0)),
      exchange_(exchange),
      train_(train),
      test_(test),
      opt_(std::move(options)),
      progress_(progress),
      clock_(clock) {}

absl::Status Trainer::ReduceGradients(const std::vector<int64_t>& rows, int64_t n) {
  // Replica r's gradient is the gradient of its rows' mean loss; the pod's
  // is their mean over all n rows: the sum of gradient_r * rows_r / n.
  std::vector<float*> grads;
  for (size_t r = 0; r < pod_.models.size(); ++r) {
    nn::Model& m = *pod_.models[r];
    if (rows[r] == 0) {
      m.device().Fill(m.grads().data(), m.num_params(), 0.0f);
    } else if (rows[r] != n) {
      m.device().Scale(m.grads().data(), m.num_params(),
                       static_cast<float>(static_cast<double>(rows[r]) / static_cast<double>(n)));
    }
    grads.push_back(m.grads().data());
  }
  return pod_.reducer->Sum(/*root=*/0, grads, model_.num_params());
}

absl::Status Trainer::BroadcastParams() {
  std::vector<float*> params;
  for (nn::Model* m : pod_.models) params.push_back(m->params().data());
  return pod_.reducer->Broadcast(/*root=*/0, params, model_.num_params());
}

absl::Status Trainer::CheckReplicasIdentical() {
  if (pod_.models.size() < 2) return absl::OkStatus();
  std::vector<float> first, other;
  for (size_t r = 0; r < pod_.models.size(); ++r) {
    nn::Model& m = *pod_.models[r];
    std::vector<float>& host = r == 0 ? first : other;
    host.resize(m.params().size());
    if (absl::Status s =
            m.device().CopyToHost(m.params().data(), host.data(), m.params().size_bytes());
        !s.ok()) {
      return s;
    }
    if (r > 0 && std::memcmp(first.data(), other.data(), m.params().size_bytes()) != 0) {
      return absl::InternalError(absl::StrCat("pod replica ", r, " on ", m.device().info().Id(),
                                              " ended with parameters different from replica 0's"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainResult> Trainer::Run() {
  // Steps, losses and the exchange's host work on this thread flush
  // subnormal values (denormals.h).
  const ScopedFlushDenormals flush;
  const int replicas = static_cast<int>(pod_.models.size());
  for (nn::Model* m : pod_.models) {
    if (m == nullptr || m->num_params() != model_.num_params() ||
        m->input_shape() != model_.input_shape() || m->output_shape() != model_.output_shape()) {
      return absl::InvalidArgumentError("pod replicas must be copies of one model");
    }
  }
  if (replicas > 1 && (pod_.reducer == nullptr || pod_.reducer->replicas() != replicas)) {
    return absl::InvalidArgumentError(
        absl::StrCat(replicas, " pod replicas need a reducer across ", replicas, " devices"));
  }
  if (opt_.epochs <= 0) return absl::InvalidArgumentError("epochs must be > 0");
  if (opt_.batch_size <= 0) return absl::InvalidArgumentError("batch size must be > 0");
  if (opt_.eval_batch_size <= 0) return absl::InvalidArgumentError("eval batch size must be > 0");
  if (absl::Status s = CheckDatasetFitsModel(train_, model_, "training"); !s.ok()) return s;
  if (test_ != nullptr) {
    if (absl::Status s = CheckDatasetFitsModel(*test_, model_, "test"); !s.ok()) return s;
  }
  absl::StatusOr<data::BatchSampler> sampler =
      data::BatchSampler::Create(train_.size(), opt_.batch_size, opt_.seed, opt_.shard_index,
                                 opt_.num_shards, /*shuffle=*/true, /*drop_last=*/false);
  if (!sampler.ok()) return sampler.status();

  // A batch that does not fit on a device fails here, before any step.
  // Each replica takes at most a ceil(1/N) share of the pod's batch.
  const int64_t replica_batch = SplitBatch(opt_.batch_size, replicas).front();
  const int64_t eval_batch =
      test_ != nullptr ? std::min(opt_.eval_batch_size, test_->size()) : int64_t{0};
  for (int r = 0; r < replicas; ++r) {
    nn::Model& m = *pod_.models[static_cast<size_t>(r)];
    if (absl::Status s = m.Reserve(r == 0 ? std::max(replica_batch, eval_batch) : replica_batch);
        !s.ok()) {
      return s;
    }
  }
  auto record_device_memory = [&] {
    if (opt_.metrics == nullptr) return;
    for (nn::Model* m : pod_.models) {
      ComputeDevice& device = m->device();
      if (device.host_memory()) continue;
      const DeviceMemory mem = device.Memory();
      opt_.metrics->SetGpuMemoryUsed(device.info().Id(), mem.total_bytes - mem.free_bytes);
    }
  };
  for (nn::Model* m : pod_.models) {
    ComputeDevice& device = m->device();
    if (device.host_memory()) continue;
    const DeviceMemory mem = device.Memory();
    constexpr double kMiB = 1 << 20;
    progress_.Info(absl::StrFormat(
        "device %s memory: model %.1f MiB, batch %d %.1f MiB, %.0f MiB free of %.0f MiB",
        device.info().Id(), 2.0 * static_cast<double>(model_.num_params()) * sizeof(float) / kMiB,
        replica_batch, static_cast<double>(model_.BatchBytes(replica_batch)) / kMiB,
        static_cast<double>(mem.free_bytes) / kMiB, static_cast<double>(mem.total_bytes) / kMiB));
  }
  record_device_memory();
  // Every replica initialises its layers (other seeds give the others their
  // own dropout masks); the parameters are replica 0's, broadcast below.
  for (int r = 0; r < replicas; ++r) {
    pod_.models[static_cast<size_t>(r)]->InitParams(opt_.seed + static_cast<uint64_t>(r) *
                                                                    0x9E3779B97F4A7C15ull);
  }
  absl::StatusOr<int64_t> start = exchange_.Start(model_.params());
  if (!start.ok()) return start.status();
  // From here a stop request is honoured at a step boundary (until the loop
  // ends, on every way out).
  struct TrainingLoop {
    StopRequest* stop;
    explicit TrainingLoop(StopRequest* s) : stop(s) {
      if (stop != nullptr) stop->BeginTraining();
    }
    void End() {
      if (stop != nullptr) stop->EndTraining();
      stop = nullptr;
    }
    ~TrainingLoop() { End(); }
  } training_loop(opt_.stop);
  auto stop_requested = [this] { return opt_.stop != nullptr && opt_.stop->requested(); };
  if (replicas > 1) {
    if (absl::Status s = BroadcastParams(); !s.ok()) return s;
  }

  const int64_t per_epoch = sampler->BatchesPerEpoch();
  const int64_t total_steps = opt_.epochs * per_epoch;  // an elastic world's: an estimate
  const bool elastic = opt_.elastic;
  // An elastic world's data follows the world the exchange reports, from
  // the position the state it took carries.
  auto follow_world = [&](int64_t at_step) -> absl::Status {
    if (std::optional<exchange::Membership> w = exchange_.CurrentMembership(); w.has_value()) {
      if (absl::Status s = sampler->Reshard(w->rank, w->size); !s.ok()) return s;
    }
    if (std::optional<exchange::DataPosition> p = exchange_.TakenDataPosition(); p.has_value()) {
      return sampler->SetCursor(p->epoch, p->cursor);
    }
    const int64_t e = sampler->BatchesPerEpoch();
    sampler->SetPosition(at_step / e, at_step % e);
    return absl::OkStatus();
  };
  int64_t step = elastic ? *start : std::min(*start, total_steps);
  if (elastic) {
    if (absl::Status s = follow_world(step); !s.ok()) return s;
  } else {
    sampler->SetPosition(step / per_epoch, step % per_epoch);
  }
  auto finished = [&] { return elastic ? sampler->epoch() >= opt_.epochs : step >= total_steps; };
  // Dropout masks follow the step, whoever resumed or re-ran it.
  auto align_dropout = [&](int64_t at_step) {
    for (nn::Model* m : pod_.models) m->SetForwardCalls(static_cast<uint64_t>(at_step));
  };
  align_dropout(step);

  const int64_t d = train_.SampleSize();
  const int64_t classes = model_.output_shape()[0];
  ComputeDevice& device = model_.device();
  AlignedBuffer features(static_cast<size_t>(opt_.batch_size * d));
  std::vector<int32_t> labels(static_cast<size_t>(opt_.batch_size));
  std::vector<DeviceBuffer> grad_logits;
  for (nn::Model* m : pod_.models) {
    absl::StatusOr<DeviceBuffer> g =
        m->device().Allocate(static_cast<size_t>(replica_batch * classes) * sizeof(float));
    if (!g.ok()) return g.status();
    grad_logits.push_back(*std::move(g));
  }
  std::vector<TensorView> logits(static_cast<size_t>(replicas));

  // One replica sums its losses on its device, read back once per progress
  // line, epoch or metrics window rather than once a step; on a device
  // with its own memory the labels are there too, and the whole data set
  // when it fits (then a step gathers its batch on the device).
  const bool sums_on_device = replicas == 1;
  DeviceBuffer loss_sums, device_labels;
  std::optional<ResidentData> resident;
  if (sums_on_device) {
    absl::StatusOr<DeviceBuffer> sums = device.Allocate(2 * sizeof(double));
    if (!sums.ok()) return sums.status();
    loss_sums = *std::move(sums);
    const double zero[2] = {0, 0};
    device.CopyToDevice(zero, loss_sums.data(), sizeof(zero));
    if (!device.host_memory()) {
      absl::StatusOr<DeviceBuffer> l =
          device.Allocate(static_cast<size_t>(opt_.batch_size) * sizeof(int32_t));
      if (!l.ok()) return l.status();
      device_labels = *std::move(l);
      absl::StatusOr<ResidentData> r =
          elastic ? absl::StatusOr<ResidentData>(absl::FailedPreconditionError(
                        "an elastic world reshards it as the world changes"))
                  : MakeResident(device, train_, sampler->ShardSize());
      if (r.ok()) {
        resident = *std::move(r);
        progress_.Info(absl::StrFormat(
            "training data resident on %s (%.1f MiB): batches gathered on the device",
            device.info().Id(),
            static_cast<double>(train_.features.size() * sizeof(float)) / (1 << 20)));
      } else {
        progress_.Info(absl::StrCat("training data stays on the host (", r.status().message(),
                                    "): each batch is copied to ", device.info().Id()));
      }
    }
  }
  double* const device_sums = static_cast<double*>(static_cast<void*>(loss_sums.data()));

  // Steps on the device alone: the step's scalars in device memory, and
  // the step captured as a graph unless --cuda-graph off.
  if (opt_.cuda_graph != "auto" && opt_.cuda_graph != "on" && opt_.cuda_graph != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("--cuda-graph must be auto, on or off, not '", opt_.cuda_graph, "'"));
  }
  DeviceBuffer scalars_buffer, lr_table, adam_table;
  kernels::StepScalars* scalars = nullptr;
  kernels::StepScalars mirror;  // the host's copy of what the device's should hold
  kernels::StepPlan step_plan;
  kernels::UpdatePlan update_plan;
  std::string why_not_device_steps;
  // The next kStepTable steps' learning rates (and Adam's coefficients),
  // computed here and uploaded; refilled as the steps reach their end.
  constexpr int64_t kStepTable = 4096;
  std::vector<float> host_lr, host_adam;
  // Writes the mirror (the steps' place) and, when `refill`, the tables from
  // the mirror's step, to the device (between steps, never captured).
  auto load_scalars = [&](bool refill) {
    if (refill) {
      mirror.table_first = mirror.step;
      kernels::FillStepTables(update_plan, mirror.step, mirror.optimizer_steps + 1, kStepTable,
                              host_lr.data(), update_plan.adam ? host_adam.data() : nullptr);
      device.CopyToDevice(host_lr.data(), lr_table.data(), host_lr.size() * sizeof(float));
      if (update_plan.adam) {
        device.CopyToDevice(host_adam.data(), adam_table.data(), host_adam.size() * sizeof(float));
      }
    }
    device.CopyToDevice(&mirror, scalars, sizeof(mirror));
    device.AdvanceStep(step_plan, 0, scalars);  // the step's lr and coefficients from the tables
  };
  if (!device.can_capture()) {
    why_not_device_steps = absl::StrCat(device.info().Id(), " cannot capture (CUDA GPUs can)");
  } else if (replicas != 1) {
    why_not_device_steps = "a pod of several replicas";
  } else if (!resident) {
    why_not_device_steps = "the training data is not resident on the device";
  } else {
    for (auto [buffer, bytes] : {std::pair{&scalars_buffer, sizeof(kernels::StepScalars)},
                                 std::pair{&lr_table, kStepTable * sizeof(float)},
                                 std::pair{&adam_table, 2 * kStepTable * sizeof(float)}}) {
      absl::StatusOr<DeviceBuffer> b = device.Allocate(bytes);
      if (!b.ok()) return b.status();
      *buffer = *std::move(b);
    }
    scalars = static_cast<kernels::StepScalars*>(static_cast<void*>(scalars_buffer.data()));
    std::optional<exchange::DeviceStepPlan> plan = exchange_.UseDeviceScalars(scalars);
    if (plan) {
      update_plan = plan->update;
      step_plan.batch_rows = opt_.batch_size;
      step_plan.lr = lr_table.data();
      step_plan.adam = update_plan.adam ? adam_table.data() : nullptr;
      step_plan.table_steps = kStepTable;
      host_lr.resize(kStepTable);
      if (update_plan.adam) host_adam.resize(2 * kStepTable);
      mirror.step = step;
      mirror.optimizer_steps = plan->optimizer_steps;
      mirror.cursor = sampler->batch_in_epoch() * opt_.batch_size;
      load_scalars(/*refill=*/true);
      model_.UseForwardCounter(&scalars->forwards);
    } else {
      why_not_device_steps =
          absl::StrCat("the ", exchange_.name(), " exchange's step waits on the host");
      scalars = nullptr;
    }
  }
  // The exchange and the model must not keep pointers into this Run's buffer.
  struct ReleaseScalars {
    exchange::Exchange& exchange;
    nn::Model& model;
    bool used;
    ~ReleaseScalars() {
      if (!used) return;
      exchange.UseDeviceScalars(nullptr);
      model.UseForwardCounter(nullptr);
    }
  } release_scalars{exchange_, model_, scalars != nullptr};
  bool capture = scalars != nullptr && opt_.cuda_graph != "off";
  if (opt_.cuda_graph == "on" && scalars == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("--cuda-graph on: a step cannot be captured: ", why_not_device_steps));
  }
  if (!device.host_memory()) {
    progress_.Info(capture ? "CUDA graphs: on (a step is captured after 2 warm-up steps)"
                   : scalars != nullptr
                       ? "CUDA graphs: off (--cuda-graph off)"
                       : absl::StrCat("CUDA graphs: off (", why_not_device_steps, ")"));
  }
  std::unique_ptr<DeviceGraph> graph;
  int64_t device_steps = 0;  // run on the device alone, captured or not
  LossTotals host_totals;    // several replicas: summed on the host, step by step
  auto read_totals = [&]() -> absl::StatusOr<LossTotals> {
    if (!sums_on_device) return host_totals;
    double sums[2];
    if (absl::Status s = device.CopyToHost(loss_sums.data(), sums, sizeof(sums)); !s.ok()) return s;
    return LossTotals{sums[0], sums[1]};
  };

  TrainResult result;
  const double t0 = clock_.NowSeconds();
  double epoch_t0 = t0, window_t0 = t0;
  LossTotals epoch_from, window_from, metrics_from;  // totals at each window's start
  int64_t epoch_samples = 0, window_samples = 0;
  int64_t epoch_batches = 0, total_samples = 0;
  const int64_t first_step = step;

  // Step time split into compute (data, forward, backward) and exchange.
  double window_step_s = 0, window_exchange_s = 0, epoch_step_s = 0, epoch_exchange_s = 0;
  double total_step_s = 0, total_exchange_s = 0;
  // Metrics gauges are window means over about a second.
  constexpr double kMetricsWindowSeconds = 1.0;
  metrics::RuntimeMetrics* const m = opt_.metrics;
  double metrics_t0 = t0;
  int64_t metrics_samples = 0;
  if (m != nullptr) {
    m->SetTotalSteps(total_steps);
    m->SetGlobalStep(step);
  }
  auto share = [](double part, double whole) { return whole > 0 ? part / whole : 0.0; };

  while (!finished()) {
    // A step boundary: the parameters are those after step `step`.
    if (stop_requested()) return StopAt(step, std::move(result), t0);
    const double step_t0 = clock_.NowSeconds();
    const int64_t batch_epoch = sampler->epoch();
    const exchange::DataPosition batch_start{sampler->epoch(), sampler->cursor()};
    if (resident && resident->epoch != sampler->epoch()) {
      LoadEpochOrder(device, *sampler, sampler->epoch(), *resident);
      if (scalars != nullptr) {
        // The device's cursor restarts with the epoch's order.
        mirror.cursor = sampler->batch_in_epoch() * opt_.batch_size;
        load_scalars(/*refill=*/false);
      }
    }
    if (scalars != nullptr && mirror.step - mirror.table_first >= kStepTable - 1) {
      load_scalars(/*refill=*/true);  // the tables' next window
    }
    const int64_t batch_in_epoch = sampler->batch_in_epoch();
    std::span<const int64_t> idx = sampler->NextBatch();
    exchange_.SetDataPosition(step, batch_start, {sampler->epoch(), sampler->cursor()});
    const int64_t n = static_cast<int64_t>(idx.size());
    absl::StatusOr<int64_t> next;
    double compute_t1 = 0;
    if (scalars != nullptr) {
      // Everything the step queues, in order: the device reads its
      // position, learning rate and dropout call from `scalars`.
      const auto queue_step = [&]() -> absl::Status {
        if (n == 0) {
          // No sample for this rank in the epoch's last step (BatchSampler):
          // it takes part in the step with a zero gradient.
          device.Fill(model_.grads().data(), model_.num_params(), 0.0f);
          if (absl::Status s = exchange_.QueueStep(model_.grads(), model_.params()); !s.ok()) {
            return s;
          }
          device.AdvanceStep(step_plan, 1, scalars);
          return absl::OkStatus();
        }
        device.GatherRows(resident->features.data(), resident->labels.ints(), d,
                          resident->order.ints(), &scalars->cursor, n, model_.InputBuffer(n),
                          device_labels.ints());
        TensorView out = model_.ForwardInput(n, /*training=*/true);
        TensorView grad(grad_logits[0].data(), {n, classes});
        device.SoftmaxCrossEntropySum(out.data(), n, classes, device_labels.ints(), grad.data(),
                                      device_sums);
        model_.Backward(grad);
        if (absl::Status s = exchange_.QueueStep(model_.grads(), model_.params()); !s.ok()) {
          return s;
        }
        device.AdvanceStep(step_plan, 1, scalars);
        return absl::OkStatus();
      };
      absl::Status queued;
      // Full batches only: the graph's kernels are sized for one.
      if (capture && n == opt_.batch_size && graph == nullptr && device_steps >= 2) {
        queued = device.BeginCapture();
        if (queued.ok()) {
          const absl::Status body = queue_step();
          absl::StatusOr<std::unique_ptr<DeviceGraph>> g = device.EndCapture();
          if (body.ok() && g.ok()) {
            graph = *std::move(g);
            progress_.Info(absl::StrCat("captured step ", step + 1, " as a CUDA graph"));
          } else {
            queued = !body.ok() ? body : g.status();
          }
        }
        if (!queued.ok()) {
          if (opt_.cuda_graph == "on") return queued;
          progress_.Info(absl::StrCat("CUDA graphs: off (", queued.message(), ")"));
          capture = false;
        }
      }
      if (graph != nullptr && n == opt_.batch_size) {
        queued = graph->Replay();
      } else {
        queued = queue_step();
      }
      if (!queued.ok()) return queued;
      ++device_steps;
      mirror.step += 1;  // as AdvanceStepScalars moved the device's
      mirror.optimizer_steps += 1;
      mirror.forwards += 1;
      mirror.cursor += opt_.batch_size;
      compute_t1 = clock_.NowSeconds();
      next = exchange_.StepQueued(step, model_.params());
    } else if (replicas == 1 && n == 0) {
      // No sample for this rank in the epoch's last step (BatchSampler): it
      // takes part in the step with a zero gradient, all of it final.
      device.Fill(model_.grads().data(), model_.num_params(), 0.0f);
      exchange_.GradientsReady(model_.grads(), 0);
    } else if (replicas == 1) {
      TensorView out;
      const int32_t* step_labels = labels.data();
      if (resident) {
        device.GatherRows(resident->features.data(), resident->labels.ints(), d,
                          resident->order.ints() + batch_in_epoch * opt_.batch_size, nullptr, n,
                          model_.InputBuffer(n), device_labels.ints());
        out = model_.ForwardInput(n, /*training=*/true);
        step_labels = device_labels.ints();
      } else {
        data::GatherBatch(train_, idx, features.data(), labels.data());
        out = model_.Forward(features.data(), n, /*training=*/true);
        if (!device.host_memory()) {
          device.CopyToDevice(labels.data(), device_labels.data(),
                              static_cast<size_t>(n) * sizeof(int32_t));
          step_labels = device_labels.ints();
        }
      }
      TensorView grad(grad_logits[0].data(), {n, classes});
      device.SoftmaxCrossEntropySum(out.data(), n, classes, step_labels, grad.data(), device_sums);
      // Finished gradients go to the exchange while backward goes on.
      model_.Backward(
          grad, [&](int64_t ready_from) { exchange_.GradientsReady(model_.grads(), ready_from); });
    }
    if (scalars == nullptr && replicas > 1) {
      data::GatherBatch(train_, idx, features.data(), labels.data());
      // Every replica's forward is queued before any loss waits for one, so
      // the devices compute side by side; then the losses, then backward.
      const std::vector<int64_t> rows = SplitBatch(n, replicas);
      std::vector<int64_t> first(static_cast<size_t>(replicas), 0);
      for (size_t r = 1; r < rows.size(); ++r) first[r] = first[r - 1] + rows[r - 1];
      for (size_t r = 0; r < rows.size(); ++r) {
        if (rows[r] == 0) continue;
        logits[r] = pod_.models[r]->Forward(features.data() + first[r] * d, rows[r],
                                            /*training=*/true);
      }
      for (size_t r = 0; r < rows.size(); ++r) {
        if (rows[r] == 0) continue;
        TensorView grad(grad_logits[r].data(), {rows[r], classes});
        absl::StatusOr<nn::LossResult> loss = nn::SoftmaxCrossEntropy(
            pod_.models[r]->device(), logits[r], labels.data() + first[r], &grad);
        if (!loss.ok()) return loss.status();
        host_totals.loss += loss->loss * static_cast<double>(rows[r]);
        host_totals.correct += static_cast<double>(loss->correct);
      }
      for (size_t r = 0; r < rows.size(); ++r) {
        if (rows[r] == 0) continue;
        pod_.models[r]->Backward(TensorView(grad_logits[r].data(), {rows[r], classes}));
      }
      // The pod's gradient is complete only after the reduction; the
      // exchange gets it whole in Step.
      if (absl::Status s = ReduceGradients(rows, n); !s.ok()) return s;
    }
    if (scalars == nullptr) {
      compute_t1 = clock_.NowSeconds();
      next = exchange_.Step(step, model_.grads(), model_.params());
    }
    if (!next.ok() && stop_requested()) {
      // Stopping made the step fail (this replica left the world, or the
      // others did): its update was never applied, the parameters are still
      // those after `step`.
      progress_.Info(
          absl::StrCat("step ", step + 1, " ended by the stop: ", next.status().message()));
      return StopAt(step, std::move(result), t0);
    }
    if (!next.ok()) {
      // What this replica was doing, for the line people read first (and
      // the pod's termination message): the exchange says whom it lost.
      return absl::Status(
          next.status().code(),
          absl::StrCat("at step ", step + 1, " of ", total_steps, " (epoch ", step / per_epoch + 1,
                       "), in the ", exchange_.name(), " exchange: ", next.status().message()));
    }
    if (replicas > 1) {
      if (absl::Status s = BroadcastParams(); !s.ok()) return s;
    }
    const double now = clock_.NowSeconds();
    const double step_s = now - step_t0, exchange_s = now - compute_t1;
    const std::optional<exchange::Membership> world = exchange_.CurrentMembership();
    const bool world_changed = world.has_value() && (world->rank != sampler->shard_index() ||
                                                     world->size != sampler->num_shards());
    if (*next != step + 1) {
      // The exchange moved this replica (a parameter server resumed from a
      // checkpoint, sync training moved on without it, a re-formed world ran
      // the aborted step again): follow it.
      progress_.Info(absl::StrCat("continuing at step ", *next, " (was ", step + 1, ")"));
    }
    if (elastic && (*next != step + 1 || world_changed)) {
      if (absl::Status s = follow_world(*next); !s.ok()) return s;
      if (world_changed) {
        progress_.Info(absl::StrCat("data resharded for a world of ", world->size, ": rank ",
                                    world->rank, ", epoch ", sampler->epoch() + 1, " at sample ",
                                    sampler->cursor()));
      }
    } else if (*next != step + 1) {
      sampler->SetPosition(std::min(*next, total_steps) / per_epoch,
                           std::min(*next, total_steps) % per_epoch);
    }
    if (*next != step + 1) align_dropout(*next);
    step = elastic ? *next : std::min(*next, total_steps);

    window_samples += n;
    epoch_samples += n;
    total_samples += n;
    ++epoch_batches;
    window_step_s += step_s;
    epoch_step_s += step_s;
    total_step_s += step_s;
    window_exchange_s += exchange_s;
    epoch_exchange_s += exchange_s;
    total_exchange_s += exchange_s;

    const bool log_line = opt_.log_every_steps > 0 && step % opt_.log_every_steps == 0;
    const bool epoch_end = elastic ? sampler->epoch() != batch_epoch || finished()
                                   : step % per_epoch == 0 || step == total_steps;
    const bool metrics_flush =
        m != nullptr && (now - metrics_t0 >= kMetricsWindowSeconds || finished());
    // The one read of the losses (a wait for the device) where a line or a
    // window needs them.
    LossTotals totals;
    if (log_line || epoch_end || metrics_flush) {
      absl::StatusOr<LossTotals> t = read_totals();
      if (!t.ok()) return t.status();
      totals = *t;
    }
    if (m != nullptr) {
      m->RecordStep({.step_seconds = step_s,
                     .compute_seconds = compute_t1 - step_t0,
                     .exchange_seconds = exchange_s,
                     .samples = n,
                     .global_step = step});
      metrics_samples += n;
      if (metrics_flush) {
        const LossTotals w = totals - metrics_from;
        m->SetTrainingWindow(
            w.loss / static_cast<double>(metrics_samples),
            w.correct / static_cast<double>(metrics_samples),
            static_cast<double>(metrics_samples) / std::max(now - metrics_t0, 1e-9),
            opt_.lr_for_step ? opt_.lr_for_step(step - 1) : 0.0);
        record_device_memory();
        metrics_from = totals;
        metrics_samples = 0;
        metrics_t0 = now;
      }
    }

    if (log_line) {
      const LossTotals w = totals - window_from;
      ProgressLine p;
      p.step = step;
      p.total_steps = total_steps;
      p.epoch = elastic ? std::min(sampler->epoch() + 1, opt_.epochs)
                        : std::min((step - 1) / per_epoch + 1, opt_.epochs);
      p.total_epochs = opt_.epochs;
      p.loss = w.loss / static_cast<double>(window_samples);
      p.accuracy = w.correct / static_cast<double>(window_samples);
      p.lr = opt_.lr_for_step ? opt_.lr_for_step(step - 1) : 0.0;
      p.samples_per_second = window_samples / std::max(now - window_t0, 1e-9);
      p.exchange_share = share(window_exchange_s, window_step_s);
      const double steps_per_second = (step - first_step) / std::max(now - t0, 1e-9);
      p.eta_seconds = (total_steps - step) / std::max(steps_per_second, 1e-9);
      progress_.Progress(p);
      window_from = totals;
      window_samples = 0;
      window_step_s = window_exchange_s = 0;
      window_t0 = now;
    }
    if (epoch_end) {
      const LossTotals w = totals - epoch_from;
      EpochLine e;
      e.epoch = elastic ? batch_epoch + 1 : (step - 1) / per_epoch + 1;
      e.total_epochs = opt_.epochs;
      e.step = step;
      e.train_loss = w.loss / static_cast<double>(std::max<int64_t>(epoch_samples, 1));
      e.train_accuracy = w.correct / static_cast<double>(std::max<int64_t>(epoch_samples, 1));
      if (test_ != nullptr && opt_.eval_every_epoch && !finished()) {
        absl::StatusOr<EvalResult> ev = Evaluate(model_, *test_, opt_.eval_batch_size);
        if (!ev.ok()) return ev.status();
        e.test_loss = ev->loss;
        e.test_accuracy = ev->accuracy;
      }
      e.exchange_share = share(epoch_exchange_s, epoch_step_s);
      e.seconds = clock_.NowSeconds() - epoch_t0;
      result.train_loss = e.train_loss;
      result.train_accuracy = e.train_accuracy;
      if (finished() && test_ != nullptr) {
        absl::StatusOr<EvalResult> ev = Evaluate(model_, *test_, opt_.eval_batch_size);
        if (!ev.ok()) return ev.status();
        result.test = *ev;
        e.test_loss = result.test.loss;
        e.test_accuracy = result.test.accuracy;
      }
      if (m != nullptr && e.test_accuracy) m->SetEvaluation(*e.test_loss, *e.test_accuracy);
      progress_.Epoch(e);
      epoch_step_s = epoch_exchange_s = 0;
      epoch_from = totals;
      epoch_samples = epoch_batches = 0;
      epoch_t0 = clock_.NowSeconds();
    }
  }
  // No boundary comes any more: a signal now ends the process at once.
  training_loop.End();
  if (absl::Status s = exchange_.Finish(); !s.ok()) return s;
  if (absl::Status s = CheckReplicasIdentical(); !s.ok()) return s;

  result.steps = step;
  result.seconds = clock_.NowSeconds() - t0;
  result.samples_per_second = total_samples / std::max(result.seconds, 1e-9);
  result.exchange_share = share(total_exchange_s, total_step_s);
  if (test_ != nullptr && result.test.samples == 0) {
    absl::StatusOr<EvalResult> ev = Evaluate(model_, *test_, opt_.eval_batch_size);
    if (!ev.ok()) return ev.status();
    result.test = *ev;
    if (m != nullptr) m->SetEvaluation(result.test.loss, result.test.accuracy);
  }
  return result;
}

absl::StatusOr<TrainResult> Trainer::StopAt(int64_t step, TrainResult result, double t0) {
  const std::string cause = opt_.stop->cause();
  const double c0 = clock_.NowSeconds();
  absl::StatusOr<std::string> path = exchange_.CheckpointNow(step, model_.params());
  if (!path.ok()) {
    return absl::Status(path.status().code(),
                        absl::StrCat("checkpoint at step ", step, " (", cause,
                                     ") not written: ", path.status().message()));
  }
  if (path->empty()) {
    progress_.Info(absl::StrCat("stopped at step ", step, " (", cause,
                                "); this replica writes no checkpoint"));
  } else {
    progress_.Info(absl::StrFormat("checkpoint at step %d written in %.2f s (%s): %s", step,
                                   clock_.NowSeconds() - c0, cause, *path));
  }
  result.stopped = StopOutcome{step, *path, cause};
  result.steps = step;
  result.seconds = clock_.NowSeconds() - t0;
  return result;
}

}  // namespace kubetrain::train
