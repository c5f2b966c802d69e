// TrainCommandOptions: every setting of `kubetrain train`, parsed once from
// the command line. Defaults here are the ones `--help` prints.
#ifndef KUBETRAIN_RUNTIME_TRAIN_TRAIN_OPTIONS_H_
#define KUBETRAIN_RUNTIME_TRAIN_TRAIN_OPTIONS_H_

#include <cstdint>
#include <string>

#include "runtime/train/lr_schedule.h"
#include "runtime/train/optimizer.h"
#include "runtime/train/trainer.h"

namespace kubetrain::train {

struct TrainCommandOptions {
  std::string model = "mlp";
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string train_csv;  // when set, read CSV instead of the IDX directory
  std::string test_csv;
  int64_t train_limit = 0;  // use only the first N training samples (0 = all)
  int threads = 0;          // BLAS threads; 0 = every available CPU
  TrainerOptions trainer;
  OptimizerOptions optimizer;
  LrScheduleOptions lr;
  TrainCommandOptions() {
    optimizer.kind = "sgd";
    optimizer.momentum = 0.9f;
    lr.kind = "cosine";
    lr.base_lr = 0.05f;
  }
};

}  // namespace kubetrain::train

#endif  // KUBETRAIN_RUNTIME_TRAIN_TRAIN_OPTIONS_H_
