// Loader for MNIST-style directories (MNIST, Fashion-MNIST, KMNIST): the four
// IDX files train-{images-idx3,labels-idx1}-ubyte and t10k-... as published,
// each either plain or gzip-compressed (".gz"). Free functions with no shared
// state: thread-safe.
#ifndef KUBETRAIN_RUNTIME_DATA_FASHION_MNIST_H_
#define KUBETRAIN_RUNTIME_DATA_FASHION_MNIST_H_

#include <string>

#include "absl/status/statusor.h"
#include "runtime/data/dataset.h"

namespace kubetrain::data {

enum class Split { kTrain, kTest };

// "train" or "test".
const char* SplitName(Split split);

// Loads one split from `dir`: kTrain reads train-images-idx3-ubyte and
// train-labels-idx1-ubyte, kTest the t10k-... pair. For each file the plain
// name is used if present, else the name with ".gz". The result has
// sample_shape {28, 28, 1} (or whatever the files declare), features in
// [0, 1] and num_classes = 10; a label outside [0, 10) is an error.
// NotFound, listing the paths tried, when `dir` or a file is missing.
absl::StatusOr<Dataset> LoadMnistStyle(const std::string& dir, Split split);

}  // namespace kubetrain::data

#endif  // KUBETRAIN_RUNTIME_DATA_FASHION_MNIST_H_
