#include "runtime/train/train_command.h"

#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/checkpoint_message.h"
#include "api/cluster_spec.h"
#include "api/env_vars.h"
#include "api/exit_codes.h"
#include "base/crc32c.h"
#include "runtime/data/batch_sampler.h"
#include "runtime/data/csv_reader.h"
#include "runtime/data/fashion_mnist.h"
#include "runtime/exchange/allreduce/allreduce_exchange.h"
#include "runtime/exchange/exchange_backend.h"
#include "runtime/exchange/local_exchange.h"
#include "runtime/exchange/ps/ps_exchange.h"
#include "runtime/exchange/ps/ps_server.h"
#include "runtime/exchange/ps/shard_client.h"
#include "runtime/exchange/ps/wire_values.h"
#include "runtime/exchange/staged_exchange.h"
#include "runtime/exchange/tcp_link.h"
#include "runtime/launcher/signal_watcher.h"
#include "runtime/metrics/constant_labels.h"
#include "runtime/metrics/metrics_server.h"
#include "runtime/metrics/runtime_metrics.h"
#include "runtime/nn/model_spec.h"
#include "runtime/tensor/blas.h"
#include "runtime/tensor/compute_device.h"
#include "runtime/tensor/device.h"
#include "runtime/train/pod_devices.h"
#include "runtime/train/stop_request.h"

namespace kubetrain::train {
namespace {

absl::Status LoadData(const TrainCommandOptions& o, bool want_train, bool want_test,
                      data::Dataset* train, data::Dataset* test) {
  if (!o.train_csv.empty()) {
    data::CsvOptions csv;
    if (want_train) {
      absl::StatusOr<data::Dataset> tr = data::LoadCsv(o.train_csv, csv);
      if (!tr.ok()) return tr.status();
      *train = *std::move(tr);
    }
    if (want_test && !o.test_csv.empty()) {
      absl::StatusOr<data::Dataset> te = data::LoadCsv(o.test_csv, csv);
      if (!te.ok()) return te.status();
      *test = *std::move(te);
    }
  } else {
    if (want_train) {
      absl::StatusOr<data::Dataset> tr = data::LoadMnistStyle(o.data_dir, data::Split::kTrain);
      if (!tr.ok()) return tr.status();
      *train = *std::move(tr);
    }
    if (want_test) {
      absl::StatusOr<data::Dataset> te = data::LoadMnistStyle(o.data_dir, data::Split::kTest);
      if (!te.ok()) return te.status();
      *test = *std::move(te);
    }
  }
  if (o.train_limit > 0 && o.train_limit < train->size()) {
    train->labels.resize(static_cast<size_t>(o.train_limit));
    train->features.resize(static_cast<size_t>(o.train_limit * train->SampleSize()));
  }
  return absl::OkStatus();
}

// Batches per epoch of shard `index` of `shards`, as the trainer's sampler
// will draw them.
absl::StatusOr<int64_t> BatchesPerEpoch(int64_t n, int index, int shards, int64_t batch) {
  absl::StatusOr<data::BatchSampler> s =
      data::BatchSampler::Create(n, batch, /*seed=*/0, index, shards, /*shuffle=*/false,
                                 /*drop_last=*/false);
  if (!s.ok()) return s.status();
  return s->BatchesPerEpoch();
}

// `exchange` as the trainer should see it: itself when the model's
// parameters are in host memory, else through pinned host staging.
absl::StatusOr<std::unique_ptr<exchange::Exchange>> ForDevice(exchange::Exchange& exchange,
                                                              nn::Model& model) {
  if (model.device().host_memory()) return nullptr;
  absl::StatusOr<std::unique_ptr<exchange::StagedExchange>> staged =
      exchange::StagedExchange::Create(exchange, model.device(), model.num_params());
  if (!staged.ok()) return staged.status();
  return std::unique_ptr<exchange::Exchange>(*std::move(staged));
}

// The model's parameters in host memory.
absl::StatusOr<std::vector<float>> HostParams(nn::Model& model) {
  std::vector<float> host(model.params().size());
  if (absl::Status s = model.device().CopyToHost(model.params().data(), host.data(),
                                                 model.params().size_bytes());
      !s.ok()) {
    return s;
  }
  return host;
}

// "final parameters crc32c=...": replicas that ended with the same
// parameters print the same line (tests and users compare them).
absl::Status ReportFinalParameters(nn::Model& model, ProgressReporter& progress) {
  absl::StatusOr<std::vector<float>> params = HostParams(model);
  if (!params.ok()) return params.status();
  progress.Info(absl::StrFormat("final parameters crc32c=%08x (%d values)",
                                base::Crc32c(params->data(), params->size() * sizeof(float)),
                                params->size()));
  return absl::OkStatus();
}

int ExitCodeFor(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsAborted(s) ? kExitPeerLost : kExitPermanent;
}

FinalLine MakeFinal(const TrainResult& r, int64_t epochs, bool has_test) {
  FinalLine f;
  if (has_test) {
    f.test_accuracy = r.test.accuracy;
    f.test_loss = r.test.loss;
  }
  f.steps = r.steps;
  f.epochs = epochs;
  f.seconds = r.seconds;
  f.samples_per_second = r.samples_per_second;
  f.exchange_share = r.exchange_share;
  return f;
}

// The training replica's cluster view, from TF_CONFIG.
struct Role {
  api::TfConfig tf;
  std::vector<std::string> ps, chief, workers, evaluators;
  int num_workers = 0;
  int worker_id = 0;  // api::WorldRank: chief 0, then workers; -1 for ps, evaluator
  std::string name;
  exchange::ExchangeBackend backend = exchange::ExchangeBackend::kLocal;
};

absl::StatusOr<Role> ParseRole(const std::string& tf_config) {
  absl::StatusOr<api::TfConfig> tf = api::ParseTfConfig(tf_config);
  if (!tf.ok())
    return absl::InvalidArgumentError(absl::StrCat("TF_CONFIG: ", tf.status().message()));
  Role r;
  r.tf = *tf;
  auto hosts = [&](const char* type) {
    auto it = r.tf.cluster.hosts.find(type);
    return it == r.tf.cluster.hosts.end() ? std::vector<std::string>{} : it->second;
  };
  r.ps = hosts("ps");
  r.chief = hosts("chief");
  r.workers = hosts("worker");
  r.evaluators = hosts("evaluator");
  r.num_workers = static_cast<int>(r.chief.size() + r.workers.size());
  r.name = absl::StrCat(r.tf.task_type, "-", r.tf.task_index);
  const std::vector<std::string> mine = hosts(r.tf.task_type.c_str());
  if (r.tf.task_type != "evaluator" &&
      (r.tf.task_index < 0 || r.tf.task_index >= static_cast<int>(mine.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("TF_CONFIG: task ", r.name, " is not in the cluster spec"));
  }
  r.worker_id = api::WorldRank(r.tf.task_type, r.tf.task_index, static_cast<int>(r.chief.size()))
                    .value_or(-1);
  r.backend = exchange::ChooseExchangeBackend({.has_cluster = true,
                                               .ps_replicas = static_cast<int>(r.ps.size()),
                                               .training_replicas = r.num_workers});
  return r;
}

int RunPs(const TrainCommandOptions& o, const Role& role, const ps::ExchangeMode& mode,
          ProgressReporter& log, metrics::RuntimeMetrics* metrics, std::ostream& err,
          const Clock& clock, std::string* termination_message) {
  const std::string& address = role.ps[static_cast<size_t>(role.tf.task_index)];
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    err << "kubetrain: error: TF_CONFIG: ps address '" << address << "' has no port" << std::endl;
    return kExitPermanent;
  }
  if (role.num_workers == 0) {
    err << "kubetrain: error: TF_CONFIG: a ps needs workers in the cluster spec" << std::endl;
    return kExitPermanent;
  }
  if (absl::Status s = optim::ValidateOptimizerOptions(o.optimizer); !s.ok()) {
    err << "kubetrain: error: " << s.message() << std::endl;
    return kExitPermanent;
  }
  ps::PsServerOptions so;
  so.listen_address = absl::StrCat("0.0.0.0:", address.substr(colon + 1));
  so.shard.shard_index = role.tf.task_index;
  so.shard.num_shards = static_cast<int>(role.ps.size());
  so.shard.num_workers = role.num_workers;
  for (size_t i = 0; i < role.chief.size(); ++i)
    so.shard.worker_names.push_back(absl::StrCat("chief-", i));
  for (size_t i = 0; i < role.workers.size(); ++i) {
    so.shard.worker_names.push_back(absl::StrCat("worker-", i));
  }
  so.shard.mode = mode;
  so.shard.replicas_to_aggregate = o.replicas_to_aggregate;
  so.shard.expect_observer = !role.evaluators.empty();
  so.shard.optimizer = o.optimizer;
  so.shard.lr = o.lr;
  so.shard.checkpoint_dir = o.checkpoint_dir;
  so.shard.checkpoint_every_steps = o.checkpoint_every_steps;
  so.shard.checkpoint_every_seconds = o.checkpoint_every_seconds;
  so.shard.keep_checkpoints = o.keep_checkpoints;
  so.token = o.job_token;
  so.peer_timeout_seconds = o.peer_timeout_seconds;
  so.data_plane = o.ps_data_plane == "tcp";
  so.shard.pipeline = o.ps_pipeline;
  so.metrics = metrics;
  so.on_stop_checkpoint = [termination_message](int64_t step, const std::string& path) {
    if (termination_message != nullptr) {
      *termination_message = api::FormatCheckpointMessage({step, path});
    }
  };
  return ps::RunParameterServer(so, clock, [&log](const std::string& m) { log.Info(m); });
}

// A worker of a job without PS replicas: data-parallel training by
// allreduce. Rank: api::WorldRank (chief 0, then workers); rank 0 hosts the rendezvous on
// its own kubetrain-port, evaluates and checkpoints.
int RunAllreduceWorker(const TrainCommandOptions& o, const Role& role, v1::WireDType dtype,
                       ProgressReporter& progress, metrics::RuntimeMetrics* metrics,
                       std::ostream& err, const Clock& clock, std::string* termination_message) {
  auto fail = [&](const absl::Status& s) {
    err << "kubetrain: error: " << role.name << ": " << s.message() << std::endl;
    return ExitCodeFor(s);
  };
  if (!role.evaluators.empty()) {
    return fail(absl::InvalidArgumentError(
        "an Evaluator needs PS replicas to read parameters from; allreduce jobs evaluate on "
        "worker 0 (drop the Evaluator replica)"));
  }
  std::vector<std::string> addresses = role.chief;
  addresses.insert(addresses.end(), role.workers.begin(), role.workers.end());
  std::vector<std::string> names;
  for (size_t i = 0; i < role.chief.size(); ++i) names.push_back(absl::StrCat("chief-", i));
  for (size_t i = 0; i < role.workers.size(); ++i) names.push_back(absl::StrCat("worker-", i));
  const int rank = role.worker_id;
  std::string my_host, rank0_host;
  int my_port = 0, rank0_port = 0;
  for (const absl::Status& s :
       {exchange::SplitHostPort(addresses[static_cast<size_t>(rank)], &my_host, &my_port),
        exchange::SplitHostPort(addresses[0], &rank0_host, &rank0_port)}) {
    if (!s.ok()) {
      err << "kubetrain: error: TF_CONFIG: " << s.message() << std::endl;
      return kExitPermanent;
    }
  }
  const bool rank0 = rank == 0;
  data::Dataset train, test;
  absl::StatusOr<PodDevices> pod = OpenPodDevices(o, progress);
  if (!pod.ok()) return fail(pod.status());
  if (absl::Status s = LoadData(o, true, rank0, &train, &test); !s.ok()) {
    err << "kubetrain: error: " << s.message() << std::endl;
    return kExitPermanent;
  }
  if (absl::Status s = BuildPodModels(o, train.sample_shape, *pod, progress); !s.ok()) {
    return fail(s);
  }
  nn::Model* const model = &pod->model();
  if (absl::Status s = optim::ValidateOptimizerOptions(o.optimizer); !s.ok()) return fail(s);
  absl::StatusOr<int64_t> per_epoch =
      BatchesPerEpoch(train.size(), rank, role.num_workers, o.trainer.batch_size);
  if (!per_epoch.ok()) return fail(per_epoch.status());
  const int64_t total_steps = *per_epoch * o.trainer.epochs;
  // An elastic world's ranks were started with different worker counts: the
  // schedule is laid out for the smallest world (the most steps the job can
  // take), the same on every rank.
  const bool elastic = o.on_peer_loss == "reform" && o.max_workers > 0;
  absl::StatusOr<int64_t> schedule_per_epoch =
      elastic ? BatchesPerEpoch(train.size(), 0, std::max(o.min_workers, 1), o.trainer.batch_size)
              : per_epoch;
  if (!schedule_per_epoch.ok()) return fail(schedule_per_epoch.status());
  optim::LrScheduleOptions lr = o.lr;
  if (lr.total_steps == 0) {
    lr.total_steps = std::max<int64_t>(*schedule_per_epoch * o.trainer.epochs, 1);
  }
  absl::StatusOr<optim::LrSchedule> schedule = optim::LrSchedule::Create(lr);
  if (!schedule.ok()) return fail(schedule.status());

  allreduce::AllreduceExchangeOptions ao;
  ao.rank = rank;
  ao.names = names;
  ao.job_name = o.job_name;
  ao.rendezvous_address = addresses[0];
  ao.rendezvous_listen_address = absl::StrCat("0.0.0.0:", rank0_port);
  ao.data_advertise_host = my_host;
  ao.token = o.job_token;
  ao.rendezvous_timeout_seconds = o.rendezvous_timeout_seconds;
  ao.stall_warning_seconds = o.stall_warning_seconds;
  ao.peer_timeout_seconds = o.peer_timeout_seconds;
  ao.bucket_bytes = static_cast<int64_t>(o.bucket_mb * (1 << 20));
  ao.wire_dtype = dtype;
  ao.backend = o.allreduce_backend;
  // Parameters, gradients and optimizer state stay on the model's device.
  ao.device = &model->device();
  ao.optimizer = o.optimizer;
  ao.total_steps = total_steps;
  if (rank0) ao.checkpoint_dir = o.checkpoint_dir;
  ao.checkpoint_every_steps = o.checkpoint_every_steps;
  ao.checkpoint_every_seconds = o.checkpoint_every_seconds;
  ao.keep_checkpoints = o.keep_checkpoints;
  ao.metrics = metrics;
  ao.reform = o.on_peer_loss == "reform";
  ao.min_workers = o.min_workers;
  ao.max_workers = o.max_workers;
  ao.scale_lr_with_world = o.scale_lr_with_world;
  progress.Info(absl::StrCat(role.name, " model ", o.model, " params=", model->num_params(),
                             " shard=", rank, "/", role.num_workers, " train=", train.size(),
                             " exchange=allreduce"));
  allreduce::AllreduceExchange exchange(ao, *schedule, clock,
                                        [&progress](const std::string& m) { progress.Info(m); });
  // SIGTERM/SIGINT (a deleted pod, a preemption, a suspended job, Ctrl-C):
  // while training runs, ask it to stop at the next step boundary (rank 0
  // then checkpoints) and tell the other ranks who is leaving and why; the
  // process exits 128+signal once the trainer has stopped. Before training
  // begins, after it ends, or at a second signal: exit 128+signal at once.
  absl::StatusOr<std::unique_ptr<launcher::SignalWatcher>> signals =
      launcher::SignalWatcher::Install(/*interrupts=*/true);
  if (!signals.ok()) return fail(signals.status());
  StopRequest stop;
  // Written before stop.Request (whose mutex orders it for the trainer's
  // thread), read after the trainer saw the request.
  std::atomic<int> stop_signal{0};
  std::atomic<bool> finished{false};
  std::thread watcher([&] {
    bool stopping = false;
    while (!finished) {
      pollfd p{(*signals)->fd(), POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      for (int sig : (*signals)->Drain()) {
        if (sig != SIGTERM && sig != SIGINT) continue;
        const std::string why =
            absl::StrCat(role.name, " stopped by signal ", sig, " (", strsignal(sig), ")");
        if (!stopping) {
          stop_signal = sig;
          if (stop.Request(sig == SIGTERM ? "SIGTERM" : "SIGINT")) {
            stopping = true;
            progress.Info(
                absl::StrCat(why, "; stopping at the next step boundary",
                             rank0 && !o.checkpoint_dir.empty() ? " to write a checkpoint" : ""));
            exchange.Leave(why);
            continue;
          }
        }
        exchange.Leave(why);
        err << "kubetrain: " << why << "; exiting" << std::endl;
        std::cout.flush();
        std::_Exit(ExitForSignal(sig));
      }
    }
  });
  struct StopWatcher {
    std::atomic<bool>& finished;
    std::thread& watcher;
    ~StopWatcher() {
      finished = true;
      watcher.join();
    }
  } stop_watcher{finished, watcher};
  TrainerOptions to = o.trainer;
  to.shard_index = rank;
  to.num_shards = role.num_workers;
  to.elastic = ao.reform && ao.max_workers > 0;
  to.metrics = metrics;
  to.lr_for_step = [&exchange](int64_t step) { return exchange.LearningRate(step); };
  to.stop = &stop;
  Trainer trainer(pod->replicas(), exchange, train, rank0 ? &test : nullptr, to, progress, clock);
  absl::StatusOr<TrainResult> result = trainer.Run();
  if (stop.requested() && stop_signal != 0) {
    // Stopped on purpose: a retryable exit whatever happened (a replacement
    // resumes from the newest checkpoint), never a permanent failure.
    if (!result.ok()) {
      fail(result.status());
      return ExitForSignal(stop_signal);
    }
    if (result->stopped) {
      const StopOutcome& s = *result->stopped;
      if (termination_message != nullptr) {
        *termination_message = !s.checkpoint_path.empty()
                                   ? api::FormatCheckpointMessage({s.step, s.checkpoint_path})
                                   : absl::StrCat("kubetrain: stopped at step ", s.step, " (",
                                                  s.cause, "); rank 0 writes the checkpoint");
      }
      // A worker leaving an elastic world (a scale-down: the operator
      // deletes the highest indexes) is done, not failed: the others go on
      // without it. Worker 0 keeps 128+signal: its exit 0 is the job's
      // success.
      if (to.elastic && rank != 0) {
        progress.Info(absl::StrCat(role.name, " left the elastic world at step ", s.step));
        return kExitSuccess;
      }
      return ExitForSignal(stop_signal);
    }
  }
  if (!result.ok()) return fail(result.status());
  // Every rank prints the same checksum when the ranks stayed in lockstep.
  if (absl::Status s = ReportFinalParameters(*model, progress); !s.ok()) return fail(s);
  progress.Final(MakeFinal(*result, o.trainer.epochs, rank0));
  return kExitSuccess;
}

// While alive, a thread that answers SIGTERM/SIGINT (a deleted pod, a
// scale-down, Ctrl-C) by calling `leave` with who leaves and why, then exits
// 128+signal, as the allreduce path's watcher does.
class LeaveOnStopSignal {
 public:
  static absl::StatusOr<std::unique_ptr<LeaveOnStopSignal>> Start(
      const std::string& name, std::function<void(const std::string&)> leave, std::ostream& err) {
    absl::StatusOr<std::unique_ptr<launcher::SignalWatcher>> signals =
        launcher::SignalWatcher::Install(/*interrupts=*/true);
    if (!signals.ok()) return signals.status();
    return std::unique_ptr<LeaveOnStopSignal>(
        new LeaveOnStopSignal(name, std::move(leave), err, *std::move(signals)));
  }
  ~LeaveOnStopSignal() {
    finished_ = true;
    watcher_.join();
  }

 private:
  LeaveOnStopSignal(const std::string& name, std::function<void(const std::string&)> leave,
                    std::ostream& err, std::unique_ptr<launcher::SignalWatcher> signals)
      : signals_(std::move(signals)) {
    watcher_ = std::thread([this, name, leave = std::move(leave), &err] {
      while (!finished_) {
        pollfd p{signals_->fd(), POLLIN, 0};
        if (poll(&p, 1, 200) <= 0) continue;
        for (int sig : signals_->Drain()) {
          if (sig != SIGTERM && sig != SIGINT) continue;
          const std::string why =
              absl::StrCat(name, " stopped by signal ", sig, " (", strsignal(sig), ")");
          leave(why);
          err << "kubetrain: " << why << "; exiting" << std::endl;
          std::cout.flush();
          std::_Exit(ExitForSignal(sig));
        }
      }
    });
  }

  std::unique_ptr<launcher::SignalWatcher> signals_;
  std::atomic<bool> finished_{false};
  std::thread watcher_;
};

int RunPsWorker(const TrainCommandOptions& o, const Role& role, const ps::ExchangeMode& mode,
                v1::WireDType dtype, ProgressReporter& progress, metrics::RuntimeMetrics* metrics,
                std::ostream& err, const Clock& clock) {
  auto fail = [&](const absl::Status& s) {
    err << "kubetrain: error: " << role.name << ": " << s.message() << std::endl;
    return ExitCodeFor(s);
  };
  const bool initializer = role.worker_id == 0;
  data::Dataset train, test;
  absl::StatusOr<PodDevices> pod = OpenPodDevices(o, progress);
  if (!pod.ok()) return fail(pod.status());
  if (absl::Status s = LoadData(o, true, initializer, &train, &test); !s.ok()) {
    err << "kubetrain: error: " << s.message() << std::endl;
    return kExitPermanent;
  }
  if (absl::Status s = BuildPodModels(o, train.sample_shape, *pod, progress); !s.ok()) {
    return fail(s);
  }
  nn::Model* const model = &pod->model();
  absl::StatusOr<int64_t> per_epoch =
      BatchesPerEpoch(train.size(), role.worker_id, role.num_workers, o.trainer.batch_size);
  if (!per_epoch.ok()) return fail(per_epoch.status());
  ps::PsExchangeOptions eo;
  eo.ps_addresses = role.ps;
  eo.worker = role.worker_id;
  eo.worker_name = role.name;
  eo.initializer = initializer;
  eo.mode = mode;
  eo.wire_dtype = dtype;
  eo.token = o.job_token;
  eo.data_plane = o.ps_data_plane == "tcp";
  eo.peer_timeout_seconds = o.peer_timeout_seconds;
  eo.metrics = metrics;
  eo.total_steps =
      *per_epoch * o.trainer.epochs * (mode.kind == ps::ExchangeMode::kSync ? 1 : role.num_workers);
  progress.Info(absl::StrCat(role.name, " model ", o.model, " params=", model->num_params(),
                             " shard=", role.worker_id, "/", role.num_workers, " train=",
                             train.size(), " ps=", role.ps.size(), " mode=", mode.ToString()));
  ps::PsExchange exchange(eo, clock, [&progress](const std::string& m) { progress.Info(m); });
  // SIGTERM/SIGINT: tell every shard this worker leaves (sync rounds stop
  // waiting for it), then exit 128+signal.
  absl::StatusOr<std::unique_ptr<LeaveOnStopSignal>> leave_on_signal = LeaveOnStopSignal::Start(
      role.name, [&exchange](const std::string& why) { exchange.Leave(why); }, err);
  if (!leave_on_signal.ok()) return fail(leave_on_signal.status());
  optim::LrScheduleOptions lr = o.lr;
  lr.total_steps = std::max<int64_t>(eo.total_steps, 1);
  absl::StatusOr<optim::LrSchedule> schedule = optim::LrSchedule::Create(lr);
  if (!schedule.ok()) return fail(schedule.status());
  TrainerOptions to = o.trainer;
  to.shard_index = role.worker_id;
  to.num_shards = role.num_workers;
  to.metrics = metrics;
  to.lr_for_step = [&](int64_t) { return schedule->At(exchange.global_step()); };
  absl::StatusOr<std::unique_ptr<exchange::Exchange>> staged = ForDevice(exchange, *model);
  if (!staged.ok()) return fail(staged.status());
  Trainer trainer(pod->replicas(), *staged != nullptr ? **staged : exchange, train,
                  initializer ? &test : nullptr, to, progress, clock);
  absl::StatusOr<TrainResult> result = trainer.Run();
  if (!result.ok()) return fail(result.status());
  // In sync mode every worker's last pull is the same update: one checksum.
  if (absl::Status s = ReportFinalParameters(*model, progress); !s.ok()) return fail(s);
  progress.Final(MakeFinal(*result, o.trainer.epochs, initializer));
  return kExitSuccess;
}

// Evaluates the parameter servers' current parameters every interval until
// the workers finish.
int RunEvaluator(const TrainCommandOptions& o, const Role& role, ProgressReporter& progress,
                 metrics::RuntimeMetrics* metrics, std::ostream& err, const Clock& clock) {
  data::Dataset train, test;
  if (absl::Status s = LoadData(o, false, true, &train, &test); !s.ok()) {
    err << "kubetrain: error: " << s.message() << std::endl;
    return kExitPermanent;
  }
  absl::StatusOr<std::unique_ptr<nn::Model>> model = nn::LoadModel(o.model, test.sample_shape);
  if (!model.ok()) {
    err << "kubetrain: error: " << model.status().message() << std::endl;
    return kExitPermanent;
  }
  if (role.ps.empty()) {
    err << "kubetrain: error: the evaluator needs PS replicas to read parameters from" << std::endl;
    return kExitPermanent;
  }
  std::vector<std::unique_ptr<ps::ShardClient>> clients;
  for (size_t i = 0; i < role.ps.size(); ++i) {
    clients.push_back(
        std::make_unique<ps::ShardClient>(absl::StrCat("ps-", i), role.ps[i], o.job_token));
  }
  const int64_t n = (*model)->num_params();
  std::span<float> params = (*model)->params();
  int64_t last_step = -1;
  double last_ok = clock.NowSeconds();
  std::string last_error;
  while (true) {
    int64_t step = INT64_MAX;
    bool finished = true;
    absl::Status error;
    for (size_t i = 0; i < clients.size() && error.ok(); ++i) {
      const ps::Range r = ps::ShardRange(n, static_cast<int>(clients.size()), static_cast<int>(i));
      v1::PullRequest req;
      req.set_worker(ps::kObserver);
      req.set_min_step(last_step + 1);  // long-poll: wait for progress or the end
      absl::StatusOr<ps::PullReply> reply = clients[i]->Pull(
          req, params.subspan(static_cast<size_t>(r.offset), static_cast<size_t>(r.length)),
          r.offset);
      if (!reply.ok()) {
        error = reply.status();
        break;
      }
      step = std::min(step, reply->global_step);
      finished = finished && reply->finished;
    }
    if (error.ok()) {
      last_ok = clock.NowSeconds();
      if (step != last_step) {
        absl::StatusOr<EvalResult> evaluated = Evaluate(**model, test, o.trainer.eval_batch_size);
        if (!evaluated.ok()) {
          err << "kubetrain: error: " << evaluated.status().message() << std::endl;
          return ExitCodeFor(evaluated.status());
        }
        const EvalResult& ev = *evaluated;
        if (metrics != nullptr) {
          metrics->SetEvaluation(ev.loss, ev.accuracy);
          metrics->SetGlobalStep(step);
        }
        progress.Info(
            absl::StrCat("eval step=", step, " test_loss=", ev.loss, " test_acc=", ev.accuracy));
        last_step = step;
      }
      if (finished) {
        progress.Info("training finished; evaluator done");
        return kExitSuccess;
      }
    } else {
      if (error.message() != last_error) {
        progress.Info(absl::StrCat("waiting for the parameter servers: ", error.message()));
        last_error = std::string(error.message());
      }
      if (clock.NowSeconds() - last_ok > o.peer_timeout_seconds) {
        err << "kubetrain: error: " << role.name << ": lost the parameter servers for more than "
            << o.peer_timeout_seconds << "s: " << error.message() << std::endl;
        return kExitPeerLost;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(
        static_cast<int64_t>(std::max(0.1, o.eval_interval_seconds) * 1000)));
  }
}

absl::StatusOr<TrainResult> RunTrainingWith(const TrainCommandOptions& o,
                                            ProgressReporter& progress,
                                            metrics::RuntimeMetrics* metrics, const Clock& clock) {
  SetBlasThreads(o.threads);

  data::Dataset train, test;
  absl::StatusOr<PodDevices> pod = OpenPodDevices(o, progress);
  if (!pod.ok()) return pod.status();
  if (absl::Status s = LoadData(o, true, true, &train, &test); !s.ok()) return s;
  progress.Info(absl::StrCat("data train=", train.size(), " test=", test.size(),
                             " shape=", ShapeToString(train.sample_shape)));

  if (absl::Status s = BuildPodModels(o, train.sample_shape, *pod, progress); !s.ok()) return s;
  nn::Model* const model = &pod->model();
  progress.Info(absl::StrCat("model ", o.model, " params=", model->num_params(),
                             " blas_threads=", BlasThreads()));

  absl::StatusOr<std::unique_ptr<optim::Optimizer>> optimizer =
      optim::MakeOptimizer(o.optimizer, static_cast<size_t>(model->num_params()), &model->device());
  if (!optimizer.ok()) return optimizer.status();

  // The schedule spans the whole run; cosine needs the step count.
  optim::LrScheduleOptions lr = o.lr;
  if (lr.total_steps == 0) {
    absl::StatusOr<int64_t> per_epoch = BatchesPerEpoch(train.size(), o.trainer.shard_index,
                                                        o.trainer.num_shards, o.trainer.batch_size);
    if (!per_epoch.ok()) return per_epoch.status();
    lr.total_steps = *per_epoch * o.trainer.epochs;
  }
  absl::StatusOr<optim::LrSchedule> schedule = optim::LrSchedule::Create(lr);
  if (!schedule.ok()) return schedule.status();

  exchange::LocalExchange exchange(*std::move(optimizer), *schedule);
  TrainerOptions to = o.trainer;
  to.lr_for_step = [&exchange](int64_t step) { return exchange.LearningRate(step); };
  to.metrics = metrics;
  Trainer trainer(pod->replicas(), exchange, train, test.size() > 0 ? &test : nullptr, to, progress,
                  clock);
  absl::StatusOr<TrainResult> result = trainer.Run();
  if (!result.ok()) return result.status();
  progress.Final(MakeFinal(*result, o.trainer.epochs, test.size() > 0));
  return result;
}

// Metrics for this replica's role, served on --metrics-port unless 0. A
// port that cannot be bound is reported and training goes on without it:
// metrics must never stop a job.
struct ReplicaMetrics {
  std::unique_ptr<metrics::RuntimeMetrics> metrics;
  std::unique_ptr<metrics::MetricsServer> server;
};

ReplicaMetrics StartMetrics(const TrainCommandOptions& o, const Role* role,
                            ProgressReporter& progress) {
  metrics::RuntimeMetricsOptions mo;
  const std::map<std::string, std::string> env = {{api::kEnvJobName, o.job_name},
                                                  {api::kEnvNamespace, o.job_namespace},
                                                  {api::kEnvReplicaType, o.replica_type},
                                                  {api::kEnvReplicaIndex, o.replica_index}};
  mo.constant_labels = metrics::ConstantLabelsFromEnv(
      [&env](const std::string& name) -> std::optional<std::string> {
        auto it = env.find(name);
        if (it == env.end() || it->second.empty()) return std::nullopt;
        return it->second;
      },
      role != nullptr ? role->tf.task_type : "",
      role != nullptr ? absl::StrCat(role->tf.task_index) : "");
  const std::string type = role != nullptr ? role->tf.task_type : "";
  const bool trains = role == nullptr || type == "worker" || type == "chief";
  mo.training = trains;
  mo.evaluates = role == nullptr || type == "evaluator" || (trains && role->worker_id == 0);
  const exchange::ExchangeBackend backend =
      role != nullptr ? role->backend : exchange::ExchangeBackend::kLocal;
  mo.ps_client = trains && backend == exchange::ExchangeBackend::kParameterServer;
  mo.allreduce = trains && backend == exchange::ExchangeBackend::kAllreduce;
  mo.writes_checkpoints = mo.allreduce && role->worker_id == 0 && !o.checkpoint_dir.empty();
  mo.ps_server = type == "ps";
  mo.start_time_unix_seconds = o.start_time_unix_seconds;
  ReplicaMetrics r;
  r.metrics = std::make_unique<metrics::RuntimeMetrics>(mo);
  if (o.metrics_port > 0) {
    absl::StatusOr<std::unique_ptr<metrics::MetricsServer>> server =
        metrics::MetricsServer::Start(o.metrics_address, o.metrics_port, r.metrics->registry());
    if (server.ok()) {
      r.server = *std::move(server);
      progress.Info(
          absl::StrCat("metrics on http://", o.metrics_address, ":", r.server->port(), "/metrics"));
    } else {
      progress.Info(absl::StrCat("warning: no metrics: ", server.status().message()));
    }
  }
  return r;
}

}  // namespace

absl::StatusOr<TrainResult> RunTraining(const TrainCommandOptions& o, std::ostream& out,
                                        const Clock& clock) {
  ProgressReporter progress(out);
  return RunTrainingWith(o, progress, /*metrics=*/nullptr, clock);
}

int RunTrainCommand(const TrainCommandOptions& o, std::ostream& out, std::ostream& err,
                    const Clock& clock, std::string* termination_message) {
  SetBlasThreads(o.threads);
  absl::StatusOr<LogFormat> format = ParseLogFormat(o.log_format);
  if (!format.ok()) {
    err << "kubetrain: error: " << format.status().message() << std::endl;
    return kExitPermanent;
  }
  ProgressReporter progress(out, "", *format);
  // Without a cluster the one candidate that fits is local training
  // (exchange_backend.h).
  if (exchange::ChooseExchangeBackend({.has_cluster = !o.tf_config.empty()}) ==
      exchange::ExchangeBackend::kLocal) {
    ReplicaMetrics m = StartMetrics(o, nullptr, progress);
    absl::StatusOr<TrainResult> r = RunTrainingWith(o, progress, m.metrics.get(), clock);
    if (!r.ok()) {
      err << "kubetrain: error: " << r.status().message() << std::endl;
      return ExitCodeFor(r.status());
    }
    return kExitSuccess;
  }
  absl::StatusOr<Role> role = ParseRole(o.tf_config);
  absl::StatusOr<ps::ExchangeMode> mode = ps::ExchangeMode::Parse(o.exchange_mode);
  absl::StatusOr<v1::WireDType> dtype = ps::ParseWireDType(o.wire_dtype);
  for (const absl::Status& s : {role.status(), mode.status(), dtype.status()}) {
    if (!s.ok()) {
      err << "kubetrain: error: " << s.message() << std::endl;
      return kExitPermanent;
    }
  }
  const std::string& type = role->tf.task_type;
  if (type != "ps" && type != "worker" && type != "chief" && type != "evaluator") {
    err << "kubetrain: error: TF_CONFIG: unknown task type '" << type
        << "' (ps, worker, chief, evaluator)" << std::endl;
    return kExitPermanent;
  }
  ReplicaMetrics m = StartMetrics(o, &*role, progress);
  if (type == "ps") {
    return RunPs(o, *role, *mode, progress, m.metrics.get(), err, clock, termination_message);
  }
  if (type == "worker" || type == "chief") {
    switch (role->backend) {
      case exchange::ExchangeBackend::kParameterServer:
        return RunPsWorker(o, *role, *mode, *dtype, progress, m.metrics.get(), err, clock);
      case exchange::ExchangeBackend::kAllreduce:
        return RunAllreduceWorker(o, *role, *dtype, progress, m.metrics.get(), err, clock,
                                  termination_message);
      case exchange::ExchangeBackend::kLocal:
        break;  // a cluster always has a distributed backend
    }
    err << "kubetrain: error: no exchange backend for " << role->name << std::endl;
    return kExitPermanent;
  }
  return RunEvaluator(o, *role, progress, m.metrics.get(), err, clock);
}

}  // namespace kubetrain::train
