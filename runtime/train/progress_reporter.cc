#include "runtime/train/progress_reporter.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kubetrain::train {
namespace {

// The two-character JSON escape of `c`, or null when it has none.
const char* ShortJsonEscape(char c) {
  switch (c) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\n':
      return "\\n";
    case '\t':
      return "\\t";
    case '\r':
      return "\\r";
    default:
      return nullptr;
  }
}

void AppendJsonString(std::string* out, const std::string& s) {
  out->push_back('"');
  for (const char c : s) {
    if (const char* escape = ShortJsonEscape(c)) {
      out->append(escape);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(out, "\\u%04x", static_cast<unsigned char>(c));
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.6g", v);
}

// Builds a line in both formats at once: `kind key=value ...` and the JSON
// object with the same keys.
class LineBuilder {
 public:
  explicit LineBuilder(const char* kind) : kind_(kind), text_(kind) {}

  // key=<text>; JSON "key": value.
  LineBuilder& Num(const char* key, const std::string& text, double value) {
    absl::StrAppend(&text_, " ", key, "=", text);
    Json(key, JsonNumber(value));
    return *this;
  }
  LineBuilder& Int(const char* key, int64_t value) {
    absl::StrAppend(&text_, " ", key, "=", value);
    Json(key, absl::StrCat(value));
    return *this;
  }
  // key=a/b; JSON "key": a, "total_key": b.
  LineBuilder& Frac(const char* key, int64_t a, int64_t b, const char* total_key) {
    absl::StrAppend(&text_, " ", key, "=", a, "/", b);
    Json(key, absl::StrCat(a));
    Json(total_key, absl::StrCat(b));
    return *this;
  }

  std::string Build(LogFormat format) const {
    if (format == LogFormat::kText) return text_;
    std::string out = "{\"msg\":";
    AppendJsonString(&out, text_);
    out.append(",\"kind\":");
    AppendJsonString(&out, kind_);
    absl::StrAppend(&out, json_, "}");
    return out;
  }

 private:
  void Json(const char* key, const std::string& literal) {
    json_.push_back(',');
    AppendJsonString(&json_, key);
    absl::StrAppend(&json_, ":", literal);
  }

  std::string kind_;
  std::string text_;
  std::string json_;
};

std::string Fixed(const absl::FormatSpec<double>& fmt, double v) { return absl::StrFormat(fmt, v); }

}  // namespace

absl::StatusOr<LogFormat> ParseLogFormat(const std::string& name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(absl::StrCat("unknown log format '", name, "' (text, json)"));
}

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  int64_t s = static_cast<int64_t>(std::llround(seconds));
  const int64_t h = s / 3600, m = (s / 60) % 60;
  s %= 60;
  if (h > 0) return absl::StrFormat("%dh%02dm%02ds", h, m, s);
  if (m > 0) return absl::StrFormat("%dm%02ds", m, s);
  return absl::StrFormat("%ds", s);
}

std::string FormatProgress(const ProgressLine& p, LogFormat format) {
  return LineBuilder("progress")
      .Frac("step", p.step, p.total_steps, "total_steps")
      .Frac("epoch", p.epoch, p.total_epochs, "total_epochs")
      .Num("loss", Fixed("%.4f", p.loss), p.loss)
      .Num("acc", Fixed("%.4f", p.accuracy), p.accuracy)
      .Num("lr", Fixed("%.6g", p.lr), p.lr)
      .Num("samples/s", Fixed("%.0f", p.samples_per_second), std::round(p.samples_per_second))
      .Num("exchange", Fixed("%.2f", p.exchange_share), p.exchange_share)
      .Num("eta", FormatDuration(p.eta_seconds), std::round(p.eta_seconds))
      .Build(format);
}

std::string FormatEpoch(const EpochLine& e, LogFormat format) {
  LineBuilder b("epoch");
  b.Frac("epoch", e.epoch, e.total_epochs, "total_epochs")
      .Int("step", e.step)
      .Num("train_loss", Fixed("%.4f", e.train_loss), e.train_loss)
      .Num("train_acc", Fixed("%.4f", e.train_accuracy), e.train_accuracy);
  if (e.test_loss) b.Num("test_loss", Fixed("%.4f", *e.test_loss), *e.test_loss);
  if (e.test_accuracy) b.Num("test_acc", Fixed("%.4f", *e.test_accuracy), *e.test_accuracy);
  b.Num("exchange", Fixed("%.2f", e.exchange_share), e.exchange_share)
      .Num("time", Fixed("%.1fs", e.seconds), e.seconds);
  return b.Build(format);
}

std::string FormatFinal(const FinalLine& f, LogFormat format) {
  LineBuilder b("final");
  if (f.test_accuracy) b.Num("test_accuracy", Fixed("%.4f", *f.test_accuracy), *f.test_accuracy);
  if (f.test_loss) b.Num("test_loss", Fixed("%.4f", *f.test_loss), *f.test_loss);
  b.Int("steps", f.steps)
      .Int("epochs", f.epochs)
      .Num("time", Fixed("%.1fs", f.seconds), f.seconds)
      .Num("samples/s", Fixed("%.0f", f.samples_per_second), std::round(f.samples_per_second))
      .Num("exchange", Fixed("%.2f", f.exchange_share), f.exchange_share);
  return b.Build(format);
}

std::string FormatInfo(const std::string& message, LogFormat format) {
  const std::string text = absl::StrCat("info ", message);
  if (format == LogFormat::kText) return text;
  std::string out = "{\"msg\":";
  AppendJsonString(&out, text);
  out.append(",\"kind\":\"info\"}");
  return out;
}

void ProgressReporter::Write(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  out_ << prefix_ << line << '\n';
  out_.flush();
}

}  // namespace kubetrain::train
