// TrainCommandOptions: every setting of `kubetrain train`, parsed once from
// the command line. Defaults here are the ones `--help` prints.
#ifndef KUBETRAIN_RUNTIME_TRAIN_TRAIN_OPTIONS_H_
#define KUBETRAIN_RUNTIME_TRAIN_TRAIN_OPTIONS_H_

#include <cstdint>
#include <string>

#include "api/ports.h"
#include "runtime/optim/lr_schedule.h"
#include "runtime/optim/optimizer.h"
#include "runtime/train/trainer.h"

namespace kubetrain::train {

struct TrainCommandOptions {
  std::string model = "mlp";
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string train_csv;  // when set, read CSV instead of the IDX directory
  std::string test_csv;
  int64_t train_limit = 0;  // use only the first N training samples (0 = all)
  int threads = 0;          // BLAS and ParallelFor threads; 0 = every available CPU
  // Where training replicas compute (runtime/tensor/device.h SelectDevice):
  // auto (the first GPU, else the CPU), cpu, cuda, cuda:N. Parameter
  // servers and the evaluator always use the CPU.
  std::string device = "auto";
  bool tf32 = false;  // cuda: cuBLAS may use TF32 tensor cores
  // Device replicas in this pod (runtime/tensor/device.h SelectDevices):
  // GPUs from the selected one on, 0 = every visible GPU for auto/cuda (1
  // for cuda:N); on the CPU, cpu_replicas replicas (for tests and CI). The
  // per-step batch (trainer.batch_size) is split across them.
  int gpus = 0;
  int cpu_replicas = 1;
  // Distributed training (ignored without TF_CONFIG).
  std::string tf_config;               // the TF_CONFIG environment variable
  std::string job_token;               // api::kEnvJobToken
  std::string exchange_mode = "sync";  // sync | async | ssp:<s>
  int replicas_to_aggregate = 0;       // sync backup workers: 0 = every worker
  std::string wire_dtype = "fp32";     // fp32 | fp16
  bool ps_pipeline = false;            // PS replicas: pipelined sync steps on the data plane
  std::string ps_data_plane = "tcp";   // PS steps: tcp (direct TCP beside gRPC) | grpc
  double peer_timeout_seconds = 120;
  // Allreduce (jobs without PS replicas).
  double rendezvous_timeout_seconds = 300;
  // What the survivors do when a rank is lost: re-form the world and go on
  // (reform), or exit 129 so that the job restarts from a checkpoint (exit).
  std::string on_peer_loss = "reform";
  // Elastic jobs (KUBETRAIN_MIN_WORKERS / KUBETRAIN_MAX_WORKERS): the
  // world's bounds; 0: a fixed world of the cluster spec's workers.
  int min_workers = 0;
  int max_workers = 0;
  // Elastic jobs: the learning rate times world / min_workers (the linear
  // scaling rule), off by default.
  bool scale_lr_with_world = false;
  double stall_warning_seconds = 30;
  double bucket_mb = 25;
  std::string allreduce_backend = "auto";  // auto | ring | nccl
  std::string checkpoint_dir;              // PS shards, allreduce worker 0
  int64_t checkpoint_every_steps = 500;
  double checkpoint_every_seconds = 60;
  int keep_checkpoints = 3;
  double eval_interval_seconds = 10;  // evaluator: seconds between evaluations
  // Output and metrics.
  std::string log_format = "text";       // text | json
  int metrics_port = api::kMetricsPort;  // main: api::kEnvMetricsPort when set; 0 = off
  std::string metrics_address = "0.0.0.0";
  // Sources of the metrics' constant labels (main copies them from the
  // environment: api/env_vars.h kEnvJobName, kEnvNamespace, kEnvReplicaType,
  // kEnvReplicaIndex).
  std::string job_name;
  std::string job_namespace;
  std::string replica_type;
  std::string replica_index;
  double start_time_unix_seconds = 0;  // kubetrain_start_time_seconds
  TrainerOptions trainer;
  optim::OptimizerOptions optimizer;
  optim::LrScheduleOptions lr;
  TrainCommandOptions() {
    optimizer.kind = "sgd";
    optimizer.momentum = 0.9f;
    lr.kind = "cosine";
    lr.base_lr = 0.05f;
  }
};

}  // namespace kubetrain::train

#endif  // KUBETRAIN_RUNTIME_TRAIN_TRAIN_OPTIONS_H_
