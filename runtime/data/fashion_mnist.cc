#include "runtime/data/fashion_mnist.h"

#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/data/idx_reader.h"

namespace kubetrain::data {
namespace {

constexpr int kNumClasses = 10;

bool IsRegularFile(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec);
}

// Returns dir/name if it exists, else dir/name.gz if that exists, else
// nullopt; appends both candidates to `tried`.
std::optional<std::string> FindFile(const std::filesystem::path& dir, const std::string& name,
                                    std::vector<std::string>& tried) {
  const std::filesystem::path plain = dir / name;
  const std::filesystem::path gz = dir / (name + ".gz");
  if (IsRegularFile(plain)) return plain.string();
  if (IsRegularFile(gz)) return gz.string();
  tried.push_back(plain.string());
  tried.push_back(gz.string());
  return std::nullopt;
}

}  // namespace

const char* SplitName(Split split) { return split == Split::kTrain ? "train" : "test"; }

absl::StatusOr<Dataset> LoadMnistStyle(const std::string& dir, Split split) {
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  const std::string images_name = prefix + "-images-idx3-ubyte";
  const std::string labels_name = prefix + "-labels-idx1-ubyte";

  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    const bool exists = std::filesystem::exists(dir, ec);
    return absl::NotFoundError(absl::StrCat(
        dir, exists ? ": not a directory" : ": no such directory", " (looking for the ",
        SplitName(split), " split: ", images_name, "[.gz] and ", labels_name, "[.gz])"));
  }
  std::vector<std::string> missing_tried;
  const std::optional<std::string> images = FindFile(dir, images_name, missing_tried);
  const std::optional<std::string> labels = FindFile(dir, labels_name, missing_tried);
  if (!images || !labels) {
    return absl::NotFoundError(absl::StrCat(dir, ": missing MNIST-style ", SplitName(split),
                                            " files; looked for ",
                                            absl::StrJoin(missing_tried, ", ")));
  }

  absl::StatusOr<Dataset> ds = LoadIdxDataset(*images, *labels);
  if (!ds.ok()) return ds.status();
  for (int64_t i = 0; i < ds->size(); ++i) {
    if (ds->labels[i] >= kNumClasses) {
      return absl::InvalidArgumentError(absl::StrCat(*labels, ": label ", ds->labels[i],
                                                     " at index ", i, " is outside [0, ",
                                                     kNumClasses, ")"));
    }
  }
  ds->num_classes = kNumClasses;
  return ds;
}

}  // namespace kubetrain::data
