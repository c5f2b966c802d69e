// The `kubetrain` binary: wires options, clock and output, then runs a
// subcommand. `kubetrain train` trains in this process.
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/env_vars.h"
#include "api/ports.h"
#include "base/clock.h"
#include "runtime/launcher/launcher.h"
#include "runtime/nn/model_spec.h"
#include "runtime/plan/plan_command.h"
#include "runtime/tensor/denormals.h"
#include "runtime/tensor/device.h"
#include "runtime/train/termination_message.h"
#include "runtime/train/train_command.h"

namespace {

void AddTrainFlags(CLI::App* cmd, kubetrain::train::TrainCommandOptions& o) {
  auto& t = o.trainer;
  auto& opt = o.optimizer;
  auto& lr = o.lr;
  cmd->add_option("--model", o.model, "Built-in model (mlp, cnn) or a YAML/JSON model file")
      ->capture_default_str();
  cmd->add_option("--data", o.data_dir,
                  "Directory with MNIST-style IDX files (train-*/t10k-*, .gz or plain)")
      ->capture_default_str();
  cmd->add_option("--train-csv", o.train_csv,
                  "Train from a CSV file instead (label in the first column)");
  cmd->add_option("--test-csv", o.test_csv, "Test split as CSV (with --train-csv)");
  cmd->add_option("--train-limit", o.train_limit, "Use only the first N training samples (0 = all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--epochs", t.epochs, "Passes over this replica's training shard")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--batch-size", t.batch_size, "Samples per step")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--optimizer", opt.kind, "sgd or adam")
      ->capture_default_str()
      ->check(CLI::IsMember({"sgd", "adam"}));
  cmd->add_option("--lr", lr.base_lr, "Base learning rate")->capture_default_str();
  cmd->add_option("--lr-schedule", lr.kind, "constant, step or cosine")
      ->capture_default_str()
      ->check(CLI::IsMember({"constant", "step", "cosine"}));
  cmd->add_option("--lr-step-size", lr.step_size, "step schedule: steps between decays")
      ->capture_default_str();
  cmd->add_option("--lr-gamma", lr.gamma, "step schedule: decay factor")->capture_default_str();
  cmd->add_option("--lr-min", lr.min_lr, "cosine schedule: final learning rate")
      ->capture_default_str();
  cmd->add_option("--warmup-steps", lr.warmup_steps, "Linear warm-up steps")->capture_default_str();
  cmd->add_option("--momentum", opt.momentum, "sgd momentum (0 = plain SGD)")
      ->capture_default_str();
  cmd->add_flag("--nesterov", opt.nesterov, "sgd: Nesterov momentum");
  cmd->add_option("--weight-decay", opt.weight_decay, "L2 weight decay")->capture_default_str();
  cmd->add_option("--adam-beta1", opt.beta1, "adam beta1")->capture_default_str();
  cmd->add_option("--adam-beta2", opt.beta2, "adam beta2")->capture_default_str();
  cmd->add_option("--adam-epsilon", opt.epsilon, "adam epsilon")->capture_default_str();
  cmd->add_option("--seed", t.seed, "Seed for initialisation and data order")
      ->capture_default_str();
  cmd->add_option("--shard-index", t.shard_index, "This replica's data shard")
      ->capture_default_str();
  cmd->add_option("--num-shards", t.num_shards, "Number of data shards")->capture_default_str();
  cmd->add_option("--log-every", t.log_every_steps, "Steps between progress lines (0 = off)")
      ->capture_default_str();
  cmd->add_option("--eval-batch-size", t.eval_batch_size, "Batch size for evaluation")
      ->capture_default_str();
  cmd->add_option("--eval-every-epoch", t.eval_every_epoch,
                  "Evaluate on the test split after every epoch")
      ->capture_default_str();
  cmd->add_option("--threads", o.threads,
                  "compute threads: OpenBLAS and the element loops (0 = every available CPU)")
      ->capture_default_str();
  // Distributed training: the role comes from TF_CONFIG.
  cmd->add_option("--device", o.device,
                  "Where to train: auto (the first GPU, else the CPU), cpu, cuda or cuda:N")
      ->capture_default_str();
  cmd->add_option("--gpus", o.gpus,
                  "GPUs this pod trains on, one model replica each, from the --device one on; "
                  "each step's batch is split across them and their gradients are averaged with "
                  "NCCL before one exchange (0 = every visible GPU for auto/cuda: in a pod, its "
                  "nvidia.com/gpu limit; 1 for cuda:N)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--cpu-replicas", o.cpu_replicas,
                  "On the CPU: model replicas in this process, trained like --gpus replicas "
                  "(gradients averaged in host memory); for testing the multi-GPU path")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--tf32", o.tf32,
                "cuda: let cuBLAS round GEMM inputs to TF32 on tensor cores (faster; about "
                "1e-3 relative error)");
  cmd->add_option("--cuda-graph", o.trainer.cuda_graph,
                  "cuda: capture a training step as a CUDA graph and replay it (auto: where a "
                  "step runs on the GPU alone, i.e. the data resident, one replica, local "
                  "training or an allreduce world of one; on: fail if it cannot; off)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "on", "off"}));
  cmd->add_option("--exchange-mode", o.exchange_mode,
                  "Parameter-server mode: sync, async or ssp:<bound>")
      ->capture_default_str();
  cmd->add_option("--replicas-to-aggregate", o.replicas_to_aggregate,
                  "sync: gradients averaged per update; fewer than the workers makes the rest "
                  "backup workers (0 = all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--wire-dtype", o.wire_dtype,
                  "Gradient encoding on the wire (PS pushes, allreduce): fp32, fp16")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "fp16"}));
  cmd->add_option("--ps-data-plane", o.ps_data_plane,
                  "Parameter servers: also offer workers a direct TCP connection for their "
                  "steps on an ephemeral port beside gRPC (tcp: 1.1-1.8x gRPC's throughput), or "
                  "carry every step over gRPC (grpc); workers: take the direct connection where a "
                  "parameter server offers it (tcp), or step over gRPC only (grpc)")
      ->capture_default_str()
      ->check(CLI::IsMember({"tcp", "grpc"}));
  cmd->add_flag("--ps-pipeline", o.ps_pipeline,
                "Parameter servers, sync mode: apply each chunk of a step (about 1/32 of a shard's "
                "range, 16Ki-256Ki values) as soon as "
                "every worker's gradient for it has arrived, and stream the new parameters back "
                "while the pushes are still arriving (data plane only; pays where the network, not "
                "the CPU, bounds the exchange)");
  cmd->add_option("--peer-timeout", o.peer_timeout_seconds,
                  "Seconds a peer may be unreachable before this replica exits with code 129")
      ->capture_default_str();
  cmd->add_option("--on-peer-loss", o.on_peer_loss,
                  "Allreduce: when a rank is lost, restarts or leaves, the others re-form the "
                  "world at the next generation and go on without exiting (reform: the lost one's "
                  "replacement takes their state), or every rank exits with code 129 and the job "
                  "restarts from its newest checkpoint (exit)")
      ->capture_default_str()
      ->check(CLI::IsMember({"reform", "exit"}));
  cmd->add_option("--min-workers", o.min_workers,
                  "Allreduce, elastic jobs: the fewest workers the world trains with (default: "
                  "KUBETRAIN_MIN_WORKERS; 0 with --max-workers 0: a fixed world)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-workers", o.max_workers,
                  "Allreduce, elastic jobs: the most workers the world grows to (default: "
                  "KUBETRAIN_MAX_WORKERS)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--scale-lr-with-world", o.scale_lr_with_world,
                "Allreduce, elastic jobs: scale the learning rate with the world, times "
                "world / --min-workers (the linear scaling rule; the schedule is laid out for "
                "--min-workers workers either way)");
  cmd->add_option("--rendezvous-timeout", o.rendezvous_timeout_seconds,
                  "Allreduce: seconds for every worker to join before exiting with code 129, "
                  "naming the missing ones")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--stall-warning", o.stall_warning_seconds,
                  "Allreduce: seconds a collective may wait before the ranks it waits for are "
                  "logged and exported (kubetrain_allreduce_stall_seconds)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--bucket-mb", o.bucket_mb,
                  "Allreduce: gradient bucket size in MiB; each bucket's allreduce starts as soon "
                  "as backward has filled it")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 4096.0));
  cmd->add_option("--allreduce-backend", o.allreduce_backend,
                  "Allreduce: auto (NCCL when every rank's tensors are on a GPU of its own, by the "
                  "GPU UUIDs the ranks exchange; else the TCP ring, GPU buckets staged through "
                  "pinned memory), ring, nccl (refused, exit 1, when ranks share a GPU)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "ring", "nccl"}));
  cmd->add_option("--checkpoint-dir", o.checkpoint_dir,
                  "PS shards, or allreduce worker 0: checkpoint directory (resumed from on start)");
  cmd->add_option("--checkpoint-every-steps", o.checkpoint_every_steps,
                  "Checkpoint every N updates (0 = off)")
      ->capture_default_str();
  cmd->add_option("--checkpoint-every-secs", o.checkpoint_every_seconds,
                  "Checkpoint every T seconds (0 = off)")
      ->capture_default_str();
  cmd->add_option("--keep-checkpoints", o.keep_checkpoints, "Checkpoints kept (per PS shard)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--eval-interval-secs", o.eval_interval_seconds,
                  "Evaluator: seconds between evaluations")
      ->capture_default_str();
  // Output and metrics.
  cmd->add_option("--log-format", o.log_format,
                  "Progress lines as key=value text, or one JSON object per line")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  cmd->add_option("--metrics-port", o.metrics_port,
                  absl::StrCat("Serve Prometheus metrics on this port at /metrics (default: $",
                               kubetrain::api::kEnvMetricsPort, " when set, else ",
                               kubetrain::api::kMetricsPort, "; 0 = off)"))
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--metrics-address", o.metrics_address, "Address the metrics server listens on")
      ->capture_default_str();
}

// This binary's path, for replicas whose container has no command.
// The command `kubetrain run` starts replicas with: $KUBETRAIN_EXE when set
// (scripts/gpu-run.sh's run.sh points it at a wrapper that starts kubetrain
// through the packed dynamic loader), else this binary. Started through a
// dynamic loader itself (`ld-linux-x86-64.so.2 kubetrain ...`),
// /proc/self/exe names the loader, and argv[0] the binary.
std::string SelfExe(const char* argv0) {
  if (const char* exe = std::getenv("KUBETRAIN_EXE"); exe != nullptr && *exe != '\0') return exe;
  std::error_code ec;
  std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec || p.filename().string().rfind("ld-", 0) == 0) return std::string(argv0);
  return p.string();
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

}  // namespace

int main(int argc, char** argv) {
  // Flush-to-zero and denormals-are-zero before any thread starts, so every
  // thread (gRPC's, OpenBLAS's started later, ours) inherits them
  // (runtime/tensor/denormals.h).
  kubetrain::FlushDenormalsInThisThread();
  // Keep freed memory in the process: otherwise glibc hands gRPC's large
  // receive buffers back to the kernel after every exchange and the next
  // step faults the pages in again (measured: ~15% of exchange time). Fixing
  // the trim threshold also stops glibc adapting its mmap threshold, so
  // raise that to its maximum: 1 MB tensor chunks then come from the heap
  // instead of a fresh mmap (and page faults) each time.
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  // One arena: glibc's per-thread arenas live in 64 MB heaps that are
  // unmapped as soon as they empty, whatever M_TRIM_THRESHOLD says, so gRPC
  // threads receiving 1 MB chunks page-faulted fresh memory every step (a
  // third or more of a PS step's CPU in kubetrain_ps_bench).
  mallopt(M_ARENA_MAX, 1);
  CLI::App app{"kubetrain: Kubernetes-native distributed training runtime"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kubetrain 0.1.0");

  kubetrain::train::TrainCommandOptions train_options;
  // The operator and `kubetrain run` give each replica its metrics port.
  if (const std::string port = Env(kubetrain::api::kEnvMetricsPort); !port.empty()) {
    int value = 0;
    if (absl::SimpleAtoi(port, &value) && value >= 0 && value <= 65535) {
      train_options.metrics_port = value;
    } else {
      std::cerr << "kubetrain: error: " << kubetrain::api::kEnvMetricsPort << "='" << port
                << "' is not a port number" << std::endl;
      return 1;
    }
  }
  CLI::App* train = app.add_subcommand("train", "Train a model in this process");
  AddTrainFlags(train, train_options);
  // Any flag may also come from a TOML/INI file, under a [train] section
  // (`epochs = 10`); flags on the command line win. CLI11 reads config files
  // on the main app only, so the option lives there and falls through.
  app.set_config("--config", "",
                 "Read flags from a TOML/INI file: [train] section, name = value; "
                 "command-line flags win");
  train->fallthrough();

  kubetrain::launcher::LaunchOptions run_options;
  double grace_seconds = 10;
  CLI::App* run = app.add_subcommand(
      "run", "Run every replica of a TrainingJob as local processes on 127.0.0.1");
  run->add_option("job", run_options.job_file, "TrainingJob YAML or JSON file")->required();
  run->add_option(
         "--grace", grace_seconds,
         "Seconds replicas get to exit on their own, then after SIGTERM, when the job ends")
      ->capture_default_str();

  kubetrain::plan::PlanOptions plan_options;
  CLI::App* plan = app.add_subcommand(
      "plan", "Predict step time and scaling efficiency on a link (docs/scaling.md)");
  {
    auto& p = plan_options;
    plan->add_option("--model", p.model, "Built-in model (mlp, cnn) or a YAML/JSON model file")
        ->capture_default_str();
    plan->add_option("--params", p.params, "Or a bare parameter count (e.g. 25600000)")
        ->check(CLI::PositiveNumber);
    plan->add_option("--step-ms", p.step_ms,
                     "One worker's step time alone, in ms (batch / samples per second)")
        ->required();
    plan->add_option("--workers", p.workers,
                     "World sizes to predict: replicas (GPUs), --gpus-per-pod of them per pod")
        ->delimiter(',')
        ->capture_default_str();
    plan->add_option("--ps-shards", p.ps_shards,
                     "PS shard counts to predict (default: 1 and the recommended count)")
        ->delimiter(',');
    plan->add_option("--algorithms", p.algorithms, "ring, ps or ring,ps")->capture_default_str();
    plan->add_option("--gpus-per-pod", p.gpus_per_pod, "GPUs per pod (--gpus), averaged first")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    plan->add_option("--link", p.link, "Each host's link rate, each way (100mbit, 25gbit)")
        ->capture_default_str();
    plan->add_option("--alpha-us", p.alpha_us, "One-way latency per message, microseconds")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    plan->add_option("--wire-dtype", p.wire_dtype, "fp32 or fp16")->capture_default_str();
    plan->add_option("--bucket-mb", p.bucket_mb, "Allreduce bucket (default: the recommended)");
    plan->add_flag("--ps-pipeline", p.ps_pipeline, "PS steps pipelined (--ps-pipeline)");
    plan->add_option("--shared-cores", p.shared_cores,
                     "The hosts share this many cores (test hosts on one machine)")
        ->check(CLI::NonNegativeNumber);
    plan->add_option("--format", p.format, "table or csv")->capture_default_str();
  }

  CLI::App* models = app.add_subcommand("models", "Print the built-in models as YAML");
  CLI::App* devices = app.add_subcommand("devices", "List the devices this process can use");

  CLI11_PARSE(app, argc, argv);

  if (run->parsed()) {
    run_options.self_exe = SelfExe(argv[0]);
    run_options.grace = std::chrono::milliseconds(static_cast<int64_t>(grace_seconds * 1000));
    absl::StatusOr<int> code = kubetrain::launcher::RunJob(run_options, std::cout, std::cerr);
    if (!code.ok()) {
      std::cerr << "kubetrain: error: " << code.status().message() << std::endl;
      return 1;
    }
    return *code;
  }
  if (plan->parsed()) {
    if (absl::Status s = kubetrain::plan::RunPlan(plan_options, std::cout); !s.ok()) {
      std::cerr << "kubetrain: error: " << s.message() << std::endl;
      return 1;
    }
    return 0;
  }
  if (models->parsed()) {
    for (const std::string& name : kubetrain::nn::BuiltinModelNames()) {
      std::cout << "# " << name << *kubetrain::nn::BuiltinModelSpec(name) << "\n";
    }
    return 0;
  }
  if (devices->parsed()) {
    std::string why;
    for (const kubetrain::DeviceInfo& d : kubetrain::ListDevices(&why)) {
      std::cout << d.Id() << " name=\"" << d.name << "\" cores=" << d.cores;
      if (d.memory_bytes > 0) std::cout << " memory_mib=" << (d.memory_bytes >> 20);
      std::cout << "\n";
    }
    if (!why.empty()) std::cout << "# no GPU: " << why << "\n";
    return 0;
  }
  kubetrain::RealClock clock;
  train_options.tf_config = Env("TF_CONFIG");
  train_options.job_token = Env(kubetrain::api::kEnvJobToken);
  for (auto [name, value] :
       {std::pair{kubetrain::api::kEnvMinWorkers, &train_options.min_workers},
        std::pair{kubetrain::api::kEnvMaxWorkers, &train_options.max_workers}}) {
    if (const std::string v = Env(name); *value == 0 && !v.empty() && !absl::SimpleAtoi(v, value)) {
      std::cerr << "kubetrain: error: " << name << "=" << v << " is not a number" << std::endl;
      return 2;
    }
  }
  train_options.job_name = Env(kubetrain::api::kEnvJobName);
  train_options.job_namespace = Env(kubetrain::api::kEnvNamespace);
  train_options.replica_type = Env(kubetrain::api::kEnvReplicaType);
  train_options.replica_index = Env(kubetrain::api::kEnvReplicaIndex);
  train_options.start_time_unix_seconds =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // A failing replica leaves its one-line error as the container's
  // termination message (the pod's status, then the job's lastFailure).
  kubetrain::train::ErrorTee tee(std::cerr);
  std::ostream err(&tee);
  // A replica stopped by a signal after its checkpoint says so instead
  // (api/checkpoint_message.h: the operator's status.lastCheckpoint).
  std::string stopped;
  const int code =
      kubetrain::train::RunTrainCommand(train_options, std::cout, err, clock, &stopped);
  err.flush();
  const std::string message = !stopped.empty() ? stopped : code != 0 ? tee.last_error() : "";
  if (!message.empty()) {
    const std::string path = kubetrain::train::TerminationLogPath(std::getenv);
    if (!path.empty()) {
      if (absl::Status s = kubetrain::train::WriteTerminationMessage(path, message); !s.ok()) {
        std::cerr << "kubetrain: warning: no termination message: " << s.message() << std::endl;
      }
    }
  }
  return code;
}
