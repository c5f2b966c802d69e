#include "runtime/train/progress_reporter.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kubetrain::train {

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  int64_t s = static_cast<int64_t>(std::llround(seconds));
  const int64_t h = s / 3600, m = (s / 60) % 60;
  s %= 60;
  if (h > 0) return absl::StrFormat("%dh%02dm%02ds", h, m, s);
  if (m > 0) return absl::StrFormat("%dm%02ds", m, s);
  return absl::StrFormat("%ds", s);
}

std::string FormatProgress(const ProgressLine& p) {
  return absl::StrFormat(
      "progress step=%d/%d epoch=%d/%d loss=%.4f acc=%.4f lr=%.6g samples/s=%.0f eta=%s", p.step,
      p.total_steps, p.epoch, p.total_epochs, p.loss, p.accuracy, p.lr, p.samples_per_second,
      FormatDuration(p.eta_seconds));
}

std::string FormatEpoch(const EpochLine& e) {
  std::string s = absl::StrFormat("epoch epoch=%d/%d step=%d train_loss=%.4f train_acc=%.4f",
                                  e.epoch, e.total_epochs, e.step, e.train_loss, e.train_accuracy);
  if (e.test_loss) absl::StrAppendFormat(&s, " test_loss=%.4f", *e.test_loss);
  if (e.test_accuracy) absl::StrAppendFormat(&s, " test_acc=%.4f", *e.test_accuracy);
  absl::StrAppendFormat(&s, " time=%.1fs", e.seconds);
  return s;
}

std::string FormatFinal(const FinalLine& f) {
  std::string s = "final";
  if (f.test_accuracy) absl::StrAppendFormat(&s, " test_accuracy=%.4f", *f.test_accuracy);
  if (f.test_loss) absl::StrAppendFormat(&s, " test_loss=%.4f", *f.test_loss);
  absl::StrAppendFormat(&s, " steps=%d epochs=%d time=%.1fs samples/s=%.0f", f.steps, f.epochs,
                        f.seconds, f.samples_per_second);
  return s;
}

void ProgressReporter::Info(const std::string& message) { Write(absl::StrCat("info ", message)); }

void ProgressReporter::Write(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  out_ << prefix_ << line << '\n';
  out_.flush();
}

}  // namespace kubetrain::train
