// ProgressReporter: the lines `kubectl logs` shows for a training replica.
// One stable, grep-able key=value format (LogFormat::kText):
//   progress step=469/4690 epoch=1/10 loss=0.5123 acc=0.8125 lr=0.1 samples/s=23841 exchange=0.23
//   eta=1m23s epoch epoch=1/10 step=469 train_loss=... train_acc=... test_loss=... test_acc=...
//   exchange=0.23 time=3.2s final test_accuracy=0.8912 test_loss=0.3100 steps=4690 epochs=10
//   time=45.1s samples/s=... exchange=0.23 info <message>
// `exchange` is the share of step time spent in the exchange (0..1).
// LogFormat::kJson writes one JSON object per line with the same keys, plus
// "msg" (the text line) and "kind" (progress, epoch, final, info). There,
// `a/b` values become two numbers (step and total_steps, epoch and
// total_epochs) and durations (eta, time) are seconds.
// Thread-safe: lines from several threads never interleave.
#ifndef KUBETRAIN_RUNTIME_TRAIN_PROGRESS_REPORTER_H_
#define KUBETRAIN_RUNTIME_TRAIN_PROGRESS_REPORTER_H_

#include <cstdint>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"

namespace kubetrain::train {

enum class LogFormat { kText, kJson };

// "text" or "json".
absl::StatusOr<LogFormat> ParseLogFormat(const std::string& name);

struct ProgressLine {
  int64_t step = 0;
  int64_t total_steps = 0;
  int64_t epoch = 0;  // 1-based
  int64_t total_epochs = 0;
  double loss = 0;
  double accuracy = 0;
  double lr = 0;
  double samples_per_second = 0;
  double exchange_share = 0;  // of step time, over the same window
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
  double exchange_share = 0;
  double seconds = 0;
};

struct FinalLine {
  std::optional<double> test_accuracy;  // absent on replicas without a test split
  std::optional<double> test_loss;
  int64_t steps = 0;
  int64_t epochs = 0;
  double seconds = 0;
  double samples_per_second = 0;
  double exchange_share = 0;
};

// "1h02m03s", "1m23s", "12s".
std::string FormatDuration(double seconds);

std::string FormatProgress(const ProgressLine& p, LogFormat format = LogFormat::kText);
std::string FormatEpoch(const EpochLine& e, LogFormat format = LogFormat::kText);
std::string FormatFinal(const FinalLine& f, LogFormat format = LogFormat::kText);
std::string FormatInfo(const std::string& message, LogFormat format = LogFormat::kText);

class ProgressReporter {
 public:
  // `prefix` (e.g. "[worker-0] ") starts each line; may be empty.
  explicit ProgressReporter(std::ostream& out, std::string prefix = "",
                            LogFormat format = LogFormat::kText)
      : out_(out), prefix_(std::move(prefix)), format_(format) {}

  void Info(const std::string& message) { Write(FormatInfo(message, format_)); }
  void Progress(const ProgressLine& p) { Write(FormatProgress(p, format_)); }
  void Epoch(const EpochLine& e) { Write(FormatEpoch(e, format_)); }
  void Final(const FinalLine& f) { Write(FormatFinal(f, format_)); }

 private:
  void Write(const std::string& line);
  std::mutex mu_;
  std::ostream& out_;
  std::string prefix_;
  const LogFormat format_;
};

}  // namespace kubetrain::train

#endif  // KUBETRAIN_RUNTIME_TRAIN_PROGRESS_REPORTER_H_
