#include "operator/controller/prometheus_text.h"

#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kubetrain::controller {
namespace {

constexpr size_t kQuoteLimit = 80;

// The line as an error message quotes it: shortened, in quotes.
std::string QuoteLine(absl::string_view line) {
  if (line.size() <= kQuoteLimit) return absl::StrCat("\"", line, "\"");
  return absl::StrCat("\"", line.substr(0, kQuoteLimit), "...\"");
}

bool IsNameStart(char c, bool metric) {
  return absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_' || (metric && c == ':');
}
bool IsNameChar(char c, bool metric) {
  return IsNameStart(c, metric) || absl::ascii_isdigit(static_cast<unsigned char>(c));
}
bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// Reads the tokens of one line, left to right.
class LineReader {
 public:
  explicit LineReader(absl::string_view line) : line_(line) {}

  void SkipBlanks() {
    while (pos_ < line_.size() && IsBlank(line_[pos_])) ++pos_;
  }
  bool AtEnd() const { return pos_ >= line_.size(); }
  char Peek() const { return AtEnd() ? '\0' : line_[pos_]; }
  void Advance() { ++pos_; }

  // A metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) or a label name
  // ([a-zA-Z_][a-zA-Z0-9_]*); "" when none starts here.
  absl::string_view Name(bool metric) {
    size_t start = pos_;
    if (AtEnd() || !IsNameStart(line_[pos_], metric)) return {};
    while (pos_ < line_.size() && IsNameChar(line_[pos_], metric)) ++pos_;
    return line_.substr(start, pos_ - start);
  }

  // Up to the next blank or the end.
  absl::string_view Token() {
    size_t start = pos_;
    while (pos_ < line_.size() && !IsBlank(line_[pos_])) ++pos_;
    return line_.substr(start, pos_ - start);
  }

  // The rest of the line.
  absl::string_view Rest() {
    absl::string_view rest = line_.substr(pos_);
    pos_ = line_.size();
    return rest;
  }

  // A quoted label value after its opening quote, unescaped; false when the
  // quote is never closed or an escape is unknown (*error says which).
  bool QuotedValue(std::string* out, std::string* error) {
    while (pos_ < line_.size()) {
      char c = line_[pos_++];
      if (c == '"') return true;
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= line_.size()) break;
      char e = line_[pos_++];
      switch (e) {
        case '\\':
          out->push_back('\\');
          break;
        case '"':
          out->push_back('"');
          break;
        case 'n':
          out->push_back('\n');
          break;
        default:
          *error = absl::StrCat("invalid escape sequence \"\\", std::string(1, e),
                                "\" in a label value");
          return false;
      }
    }
    *error = "label value not closed by '\"'";
    return false;
  }

 private:
  absl::string_view line_;
  size_t pos_ = 0;
};

// HELP docstrings escape only backslash and newline.
std::string UnescapeHelp(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      if (text[i + 1] == 'n') {
        out.push_back('\n');
        ++i;
        continue;
      }
      if (text[i + 1] == '\\') {
        out.push_back('\\');
        ++i;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

// Prometheus writes NaN, +Inf and -Inf; Go's ParseFloat (which it uses) also
// takes other spellings, and so does absl::SimpleAtod.
bool ParseValue(absl::string_view token, double* value) {
  if (token.empty()) return false;
  return absl::SimpleAtod(token, value);
}

class Parser {
 public:
  absl::StatusOr<PrometheusExposition> Parse(absl::string_view text) {
    int line_number = 0;
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      ++line_number;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      std::string error;
      if (!ParseLine(line, &error)) {
        return absl::InvalidArgumentError(
            absl::StrCat("metrics text line ", line_number, ": ", error, ": ", QuoteLine(line)));
      }
    }
    return std::move(result_);
  }

 private:
  bool ParseLine(absl::string_view line, std::string* error) {
    LineReader r(line);
    r.SkipBlanks();
    if (r.AtEnd()) return true;
    if (r.Peek() == '#') return ParseComment(r, error);
    return ParseSample(r, error);
  }

  bool ParseComment(LineReader& r, std::string* error) {
    r.Advance();  // '#'
    r.SkipBlanks();
    absl::string_view keyword = r.Token();
    if (keyword != "HELP" && keyword != "TYPE") return true;  // a plain comment
    r.SkipBlanks();
    absl::string_view name = r.Name(/*metric=*/true);
    if (name.empty() || (!r.AtEnd() && !IsBlank(r.Peek()))) {
      *error = absl::StrCat("invalid metric name in ", keyword, " line");
      return false;
    }
    std::string family(name);
    if (keyword == "HELP") {
      if (!r.AtEnd()) r.Advance();  // the one blank after the name
      if (result_.help.count(family)) {
        *error = absl::StrCat("second HELP line for metric ", family);
        return false;
      }
      result_.help[family] = UnescapeHelp(r.Rest());
      return true;
    }
    r.SkipBlanks();
    absl::string_view type = r.Token();
    r.SkipBlanks();
    if (!r.AtEnd()) {
      *error = "text after the type in TYPE line";
      return false;
    }
    if (type != "counter" && type != "gauge" && type != "histogram" && type != "summary" &&
        type != "untyped") {
      *error = absl::StrCat("unknown metric type \"", type, "\"");
      return false;
    }
    if (result_.types.count(family)) {
      *error = absl::StrCat("second TYPE line for metric ", family);
      return false;
    }
    result_.types[family] = std::string(type);
    return true;
  }

  bool ParseSample(LineReader& r, std::string* error) {
    PrometheusSample sample;
    absl::string_view name = r.Name(/*metric=*/true);
    if (name.empty()) {
      *error = "invalid metric name";
      return false;
    }
    sample.name = std::string(name);
    if (!r.AtEnd() && !IsBlank(r.Peek()) && r.Peek() != '{') {
      *error =
          absl::StrCat("invalid character '", std::string(1, r.Peek()), "' after the metric name");
      return false;
    }
    r.SkipBlanks();
    if (r.Peek() == '{') {
      r.Advance();
      if (!ParseLabels(r, &sample, error)) return false;
      r.SkipBlanks();
    }
    absl::string_view value = r.Token();
    if (value.empty()) {
      *error = "missing value";
      return false;
    }
    if (!ParseValue(value, &sample.value)) {
      *error = absl::StrCat("invalid value \"", value, "\"");
      return false;
    }
    r.SkipBlanks();
    if (!r.AtEnd()) {
      absl::string_view ts = r.Token();
      int64_t ms = 0;
      if (!absl::SimpleAtoi(ts, &ms)) {
        *error = absl::StrCat("invalid timestamp \"", ts, "\"");
        return false;
      }
      sample.timestamp_ms = ms;
      r.SkipBlanks();
      if (!r.AtEnd()) {
        *error = "text after the timestamp";
        return false;
      }
    }
    result_.samples.push_back(std::move(sample));
    return true;
  }

  // After '{': name="value" pairs separated by ',' (a trailing ',' allowed),
  // then '}'.
  bool ParseLabels(LineReader& r, PrometheusSample* sample, std::string* error) {
    while (true) {
      r.SkipBlanks();
      if (r.Peek() == '}') {
        r.Advance();
        return true;
      }
      absl::string_view label = r.Name(/*metric=*/false);
      if (label.empty()) {
        *error = "invalid label name";
        return false;
      }
      r.SkipBlanks();
      if (r.Peek() != '=') {
        *error = absl::StrCat("expected '=' after label name \"", label, "\"");
        return false;
      }
      r.Advance();
      r.SkipBlanks();
      if (r.Peek() != '"') {
        *error = absl::StrCat("expected '\"' to open the value of label \"", label, "\"");
        return false;
      }
      r.Advance();
      std::string value;
      if (!r.QuotedValue(&value, error)) return false;
      if (!sample->labels.emplace(std::string(label), std::move(value)).second) {
        *error = absl::StrCat("duplicate label \"", label, "\"");
        return false;
      }
      r.SkipBlanks();
      if (r.Peek() == ',') {
        r.Advance();
        continue;
      }
      if (r.Peek() == '}') {
        r.Advance();
        return true;
      }
      *error = "expected ',' or '}' after a label value";
      return false;
    }
  }

  PrometheusExposition result_;
};

}  // namespace

absl::StatusOr<PrometheusExposition> ParsePrometheusText(absl::string_view text) {
  return Parser().Parse(text);
}

bool SampleMatches(const PrometheusSample& sample,
                   const std::vector<std::pair<std::string, std::string>>& expected) {
  for (const auto& [label, want] : expected) {
    auto it = sample.labels.find(label);
    if (it == sample.labels.end() || want.empty()) continue;
    if (it->second != want) return false;
  }
  return true;
}

}  // namespace kubetrain::controller
