#include "runtime/train/train_command.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/data/csv_reader.h"
#include "runtime/data/fashion_mnist.h"
#include "runtime/exchange/local_exchange.h"
#include "runtime/nn/model_spec.h"
#include "runtime/tensor/blas.h"

namespace kubetrain::train {
namespace {

absl::Status LoadData(const TrainCommandOptions& o, data::Dataset* train, data::Dataset* test) {
  if (!o.train_csv.empty()) {
    data::CsvOptions csv;
    absl::StatusOr<data::Dataset> tr = data::LoadCsv(o.train_csv, csv);
    if (!tr.ok()) return tr.status();
    *train = *std::move(tr);
    if (!o.test_csv.empty()) {
      absl::StatusOr<data::Dataset> te = data::LoadCsv(o.test_csv, csv);
      if (!te.ok()) return te.status();
      *test = *std::move(te);
    }
  } else {
    absl::StatusOr<data::Dataset> tr = data::LoadMnistStyle(o.data_dir, data::Split::kTrain);
    if (!tr.ok()) return tr.status();
    absl::StatusOr<data::Dataset> te = data::LoadMnistStyle(o.data_dir, data::Split::kTest);
    if (!te.ok()) return te.status();
    *train = *std::move(tr);
    *test = *std::move(te);
  }
  if (o.train_limit > 0 && o.train_limit < train->size()) {
    train->labels.resize(static_cast<size_t>(o.train_limit));
    train->features.resize(static_cast<size_t>(o.train_limit * train->SampleSize()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainResult> RunTraining(const TrainCommandOptions& o, std::ostream& out,
                                        const Clock& clock) {
  SetBlasThreads(o.threads);
  ProgressReporter progress(out);

  data::Dataset train, test;
  if (absl::Status s = LoadData(o, &train, &test); !s.ok()) return s;
  progress.Info(absl::StrCat("data train=", train.size(), " test=", test.size(),
                             " shape=", ShapeToString(train.sample_shape)));

  absl::StatusOr<std::unique_ptr<nn::Model>> model = nn::LoadModel(o.model, train.sample_shape);
  if (!model.ok()) return model.status();
  progress.Info(absl::StrCat("model ", o.model, " params=", (*model)->num_params(),
                             " blas_threads=", BlasThreads()));

  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
      MakeOptimizer(o.optimizer, static_cast<size_t>((*model)->num_params()));
  if (!optimizer.ok()) return optimizer.status();

  // The schedule spans the whole run; cosine needs the step count.
  const int64_t shard_size =
      (train.size() + o.trainer.num_shards - 1 - o.trainer.shard_index) / o.trainer.num_shards;
  const int64_t per_epoch =
      (shard_size + o.trainer.batch_size - 1) / std::max<int64_t>(o.trainer.batch_size, 1);
  LrScheduleOptions lr = o.lr;
  if (lr.total_steps == 0) lr.total_steps = per_epoch * o.trainer.epochs;
  absl::StatusOr<LrSchedule> schedule = LrSchedule::Create(lr);
  if (!schedule.ok()) return schedule.status();

  exchange::LocalExchange exchange(*std::move(optimizer), *schedule);
  TrainerOptions to = o.trainer;
  to.lr_for_step = [&exchange](int64_t step) { return exchange.LearningRate(step); };
  Trainer trainer(**model, exchange, train, test.size() > 0 ? &test : nullptr, to, progress, clock);
  absl::StatusOr<TrainResult> result = trainer.Run();
  if (!result.ok()) return result.status();

  FinalLine f;
  f.test_accuracy = result->test.accuracy;
  f.test_loss = result->test.loss;
  f.steps = result->steps;
  f.epochs = o.trainer.epochs;
  f.seconds = result->seconds;
  f.samples_per_second = result->samples_per_second;
  progress.Final(f);
  return result;
}

}  // namespace kubetrain::train
