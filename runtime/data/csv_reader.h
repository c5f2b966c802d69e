// Loader for labelled numeric CSV files (e.g. Kaggle's fashion-mnist_train.csv:
// "label,pixel1,...,pixel784"), plain or gzip-compressed. One row per sample:
// one integer label column, every other column a feature. No quoting: fields
// are numbers, optionally surrounded by spaces; blank lines are skipped.
// Free functions with no shared state: thread-safe.
#ifndef KUBETRAIN_RUNTIME_DATA_CSV_READER_H_
#define KUBETRAIN_RUNTIME_DATA_CSV_READER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/data/dataset.h"

namespace kubetrain::data {

struct CsvOptions {
  // Column holding the label (0-based). Negative counts from the end:
  // -1 is the last column.
  int label_column = 0;
  // true: the first line is a header and is skipped. false: no header.
  // nullopt (default): auto-detect; the first line is a header iff one of its
  // fields is not a number.
  std::optional<bool> has_header;
  // Every feature is multiplied by this, e.g. 1/255 for pixel values.
  float scale = 1.0f;
  // Shape of one sample; its product must equal the number of feature
  // columns. Empty means {number of feature columns}.
  std::vector<int64_t> sample_shape;
  char delimiter = ',';
};

// Loads `path`. num_classes is max label + 1. Errors are InvalidArgument
// "<path>:<line>: <problem>" for a non-numeric or non-finite field, a row with
// the wrong number of columns, a label that is negative or not an integer, a
// label column outside the row, or sample_shape not matching the feature
// count; "<path>: ..." for an empty file or a header with no rows; NotFound
// when the file does not exist.
absl::StatusOr<Dataset> LoadCsv(const std::string& path, const CsvOptions& options = {});

}  // namespace kubetrain::data

#endif  // KUBETRAIN_RUNTIME_DATA_CSV_READER_H_
