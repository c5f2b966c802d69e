// Reader for IDX files, the format of MNIST and Fashion-MNIST
// (http://yann.lecun.com/exdb/mnist/): a 4-byte magic 0x0000TTNN (TT = element
// type, NN = number of dimensions), NN big-endian uint32 dimension sizes, then
// the elements in row-major order. Only unsigned-byte elements (TT = 0x08) are
// supported. Files may be gzip-compressed or plain; zlib detects which.
// Free functions with no shared state: thread-safe.
#ifndef KUBETRAIN_RUNTIME_DATA_IDX_READER_H_
#define KUBETRAIN_RUNTIME_DATA_IDX_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/data/dataset.h"

namespace kubetrain::data {

// The contents of one IDX file.
struct IdxArray {
  // Dimension sizes from the header, e.g. {60000, 28, 28} for images.
  std::vector<int64_t> dims;
  // Product(dims) elements, row-major.
  std::vector<uint8_t> data;
};

// Reads `path` (plain or gzip). Errors, each naming `path`:
//   NotFound         the file does not exist;
//   InvalidArgument  bad magic, unsupported element type, zero dimensions,
//                    header or data shorter than declared, bytes after the data,
//                    corrupt gzip stream.
absl::StatusOr<IdxArray> ReadIdx(const std::string& path);

// Loads an image file (3-D: count x rows x cols) and a label file (1-D: count)
// into a Dataset: features are pixel / 255 in [0, 1], sample_shape is
// {rows, cols, 1}, num_classes is max label + 1. Fails if either file fails
// ReadIdx, the ranks are wrong, the counts differ, or there are no images.
absl::StatusOr<Dataset> LoadIdxDataset(const std::string& images_path,
                                       const std::string& labels_path);

}  // namespace kubetrain::data

#endif  // KUBETRAIN_RUNTIME_DATA_IDX_READER_H_
