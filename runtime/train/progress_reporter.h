// ProgressReporter: the lines `kubectl logs` shows for a training replica.
// One stable, grep-able key=value format:
//   progress step=469/4690 epoch=1/10 loss=0.5123 acc=0.8125 lr=0.1 samples/s=23841 eta=1m23s
//   epoch epoch=1/10 step=469 train_loss=... train_acc=... test_loss=... test_acc=... time=3.2s
//   final test_accuracy=0.8912 test_loss=0.3100 steps=4690 epochs=10 time=45.1s samples/s=...
// Thread-safe: lines from several threads never interleave.
#ifndef KUBETRAIN_RUNTIME_TRAIN_PROGRESS_REPORTER_H_
#define KUBETRAIN_RUNTIME_TRAIN_PROGRESS_REPORTER_H_

#include <cstdint>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>

namespace kubetrain::train {

struct ProgressLine {
  int64_t step = 0;
  int64_t total_steps = 0;
  int64_t epoch = 0;  // 1-based
  int64_t total_epochs = 0;
  double loss = 0;
  double accuracy = 0;
  double lr = 0;
  double samples_per_second = 0;
  double eta_seconds = 0;
};

struct EpochLine {
  int64_t epoch = 0;
  int64_t total_epochs = 0;
  int64_t step = 0;
  double train_loss = 0;
  double train_accuracy = 0;
  std::optional<double> test_loss;
  std::optional<double> test_accuracy;
  double seconds = 0;
};

struct FinalLine {
  std::optional<double> test_accuracy;  // absent on replicas without a test split
  std::optional<double> test_loss;
  int64_t steps = 0;
  int64_t epochs = 0;
  double seconds = 0;
  double samples_per_second = 0;
};

// "1h02m03s", "1m23s", "12s".
std::string FormatDuration(double seconds);

std::string FormatProgress(const ProgressLine& p);
std::string FormatEpoch(const EpochLine& e);
std::string FormatFinal(const FinalLine& f);

class ProgressReporter {
 public:
  // `prefix` (e.g. "[worker-0] ") starts each line; may be empty.
  explicit ProgressReporter(std::ostream& out, std::string prefix = "")
      : out_(out), prefix_(std::move(prefix)) {}

  void Info(const std::string& message);
  void Progress(const ProgressLine& p) { Write(FormatProgress(p)); }
  void Epoch(const EpochLine& e) { Write(FormatEpoch(e)); }
  void Final(const FinalLine& f) { Write(FormatFinal(f)); }

 private:
  void Write(const std::string& line);
  std::mutex mu_;
  std::ostream& out_;
  std::string prefix_;
};

}  // namespace kubetrain::train

#endif  // KUBETRAIN_RUNTIME_TRAIN_PROGRESS_REPORTER_H_
