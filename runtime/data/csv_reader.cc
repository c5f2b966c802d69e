#include "runtime/data/csv_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string_view>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/data/gz_file.h"

namespace kubetrain::data {
namespace {

// Splits a GzFile into lines ('\n' or "\r\n"), counting them from 1.
class LineReader {
 public:
  explicit LineReader(GzFile file) : file_(std::move(file)) {}

  // Sets `line` to the next line without its terminator; false at end of file.
  absl::StatusOr<bool> Next(std::string_view& line) {
    while (true) {
      const size_t nl = buf_.find('\n', pos_);
      if (nl != std::string::npos) {
        line = std::string_view(buf_).substr(pos_, nl - pos_);
        pos_ = nl + 1;
        return Finish(line);
      }
      if (eof_) {
        if (pos_ >= buf_.size()) return false;
        line = std::string_view(buf_).substr(pos_);
        pos_ = buf_.size();
        return Finish(line);
      }
      buf_.erase(0, pos_);
      pos_ = 0;
      const size_t old = buf_.size();
      constexpr size_t kChunk = size_t{1} << 16;
      buf_.resize(old + kChunk);
      absl::StatusOr<size_t> got = file_.Read(buf_.data() + old, kChunk);
      if (!got.ok()) return got.status();
      buf_.resize(old + *got);
      if (*got < kChunk) eof_ = true;
    }
  }

  int64_t line_number() const { return line_number_; }

 private:
  bool Finish(std::string_view& line) {
    ++line_number_;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line_number_ == 1 && line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);  // BOM
    return true;
  }

  GzFile file_;
  std::string buf_;
  size_t pos_ = 0;
  bool eof_ = false;
  int64_t line_number_ = 0;
};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool IsBlank(std::string_view s) { return Trim(s).empty(); }

void Split(std::string_view line, char delimiter, std::vector<std::string_view>& fields) {
  fields.clear();
  while (true) {
    const size_t at = line.find(delimiter);
    fields.push_back(Trim(line.substr(0, at)));
    if (at == std::string_view::npos) return;
    line.remove_prefix(at + 1);
  }
}

enum class ParseResult { kOk, kNotNumber, kNotFinite, kOutOfRange };

template <typename T>
ParseResult ParseNumber(std::string_view s, T& value) {
  if (s.size() > 1 && s.front() == '+' && s[1] != '-') s.remove_prefix(1);
  if (s.empty()) return ParseResult::kNotNumber;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec == std::errc::result_out_of_range) return ParseResult::kOutOfRange;
  if (ec != std::errc() || end != s.data() + s.size()) return ParseResult::kNotNumber;
  if (!std::isfinite(value)) return ParseResult::kNotFinite;
  return ParseResult::kOk;
}

// Shortens a field for an error message.
std::string Quote(std::string_view field) {
  constexpr size_t kMax = 40;
  std::string out(1, '\'');
  out.append(field.data(), std::min(field.size(), kMax));
  if (field.size() > kMax) out.append("...");
  out.push_back('\'');
  return out;
}

}  // namespace

absl::StatusOr<Dataset> LoadCsv(const std::string& path, const CsvOptions& options) {
  for (int64_t d : options.sample_shape) {
    if (d <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": sample_shape ",
                                                     absl::StrJoin(options.sample_shape, "x"),
                                                     " has a non-positive dimension"));
    }
  }
  if (options.delimiter == '\n' || options.delimiter == '\r') {
    return absl::InvalidArgumentError(absl::StrCat(path, ": delimiter cannot be a line break"));
  }
  if (!std::isfinite(options.scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": scale ", options.scale, " is not finite"));
  }

  absl::StatusOr<GzFile> file = GzFile::Open(path);
  if (!file.ok()) return file.status();
  LineReader reader(*std::move(file));

  const auto error = [&](int64_t line, auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":", line, ": ", parts...));
  };

  Dataset ds;
  std::vector<std::string_view> fields;
  std::string_view line;
  size_t columns = 0;        // Expected columns per row; 0 until known.
  int64_t columns_line = 0;  // The line `columns` was taken from.
  bool header_line = false;  // Whether `columns_line` is the header.
  size_t label_col = 0;
  int64_t max_label = -1;
  bool first = true;

  while (true) {
    absl::StatusOr<bool> more = reader.Next(line);
    if (!more.ok()) return more.status();
    if (!*more) break;
    if (IsBlank(line)) continue;
    const int64_t n = reader.line_number();
    Split(line, options.delimiter, fields);

    if (first) {
      first = false;
      bool is_header = false;
      if (options.has_header.has_value()) {
        is_header = *options.has_header;
      } else {
        for (std::string_view f : fields) {
          float v;
          if (ParseNumber(f, v) == ParseResult::kNotNumber) {
            is_header = true;
            break;
          }
        }
      }
      if (fields.size() < 2) {
        return error(n, "found 1 column; need a label column and at least one feature column");
      }
      const int64_t col = options.label_column < 0
                              ? static_cast<int64_t>(fields.size()) + options.label_column
                              : options.label_column;
      if (col < 0 || col >= static_cast<int64_t>(fields.size())) {
        return error(n, "label_column ", options.label_column, " is outside the ", fields.size(),
                     " columns of this ", is_header ? "header" : "row");
      }
      label_col = static_cast<size_t>(col);
      columns = fields.size();
      columns_line = n;
      header_line = is_header;
      const size_t features = columns - 1;
      if (options.sample_shape.empty()) {
        ds.sample_shape = {static_cast<int64_t>(features)};
      } else {
        ds.sample_shape = options.sample_shape;
        if (ds.SampleSize() != static_cast<int64_t>(features)) {
          return error(n, "sample_shape ", absl::StrJoin(options.sample_shape, "x"), " has ",
                       ds.SampleSize(), " elements but the ", is_header ? "header" : "row", " has ",
                       features, " feature columns");
        }
      }
      if (is_header) continue;
    }

    if (fields.size() != columns) {
      return error(n, "found ", fields.size(), " columns, expected ", columns, " (as in the ",
                   header_line ? "header" : "first row", " on line ", columns_line, ")");
    }
    for (size_t c = 0; c < fields.size(); ++c) {
      const std::string_view f = fields[c];
      if (c == label_col) {
        double v;
        switch (ParseNumber(f, v)) {
          case ParseResult::kOk:
            break;
          case ParseResult::kNotNumber:
            return error(n, "label ", Quote(f), " in column ", c + 1, " is not a number");
          case ParseResult::kNotFinite:
            return error(n, "label ", Quote(f), " in column ", c + 1, " is not a finite number");
          case ParseResult::kOutOfRange:
            return error(n, "label ", Quote(f), " in column ", c + 1, " is out of range");
        }
        if (v < 0) return error(n, "label ", Quote(f), " in column ", c + 1, " is negative");
        if (v != std::floor(v)) {
          return error(n, "label ", Quote(f), " in column ", c + 1, " is not an integer");
        }
        if (v >= static_cast<double>(std::numeric_limits<int32_t>::max())) {
          return error(n, "label ", Quote(f), " in column ", c + 1, " is too large");
        }
        const auto label = static_cast<int32_t>(v);
        ds.labels.push_back(label);
        if (label > max_label) max_label = label;
        continue;
      }
      float v;
      switch (ParseNumber(f, v)) {
        case ParseResult::kOk:
          break;
        case ParseResult::kNotNumber:
          return error(n, f.empty() ? "empty field" : absl::StrCat("field ", Quote(f)),
                       " in column ", c + 1, " is not a number");
        case ParseResult::kNotFinite:
          return error(n, "field ", Quote(f), " in column ", c + 1, " is not a finite number");
        case ParseResult::kOutOfRange:
          return error(n, "field ", Quote(f), " in column ", c + 1, " is out of float range");
      }
      ds.features.push_back(v * options.scale);
    }
  }

  if (first) return absl::InvalidArgumentError(absl::StrCat(path, ": empty file"));
  if (ds.labels.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": no data rows after the header on line ", columns_line));
  }
  ds.num_classes = static_cast<int>(max_label + 1);
  return ds;
}

}  // namespace kubetrain::data
