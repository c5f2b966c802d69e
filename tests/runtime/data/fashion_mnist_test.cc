#include "runtime/data/fashion_mnist.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tests/support/idx_test_util.h"
#include "tests/support/temp_files.h"

namespace kubetrain::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_util::IdxBytes;
using testing_util::Iota;
using testing_util::TempDir;
using testing_util::WriteGz;
using testing_util::WritePlain;

constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

void CheckRealSplit(Split split, int64_t expected_size) {
  std::error_code ec;
  if (!std::filesystem::is_directory(kFashionMnistDir, ec)) {
    GTEST_SKIP() << "Fashion-MNIST not installed at " << kFashionMnistDir;
  }
  absl::StatusOr<Dataset> ds = LoadMnistStyle(kFashionMnistDir, split);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->size(), expected_size);
  EXPECT_THAT(ds->sample_shape, ElementsAre(28, 28, 1));
  ASSERT_EQ(ds->features.size(), static_cast<size_t>(expected_size * 28 * 28));
  const auto [lo, hi] = std::minmax_element(ds->features.begin(), ds->features.end());
  EXPECT_EQ(*lo, 0.0f);
  EXPECT_EQ(*hi, 1.0f);
  EXPECT_EQ(ds->num_classes, 10);
  // Fashion-MNIST is balanced: every class has size / 10 samples.
  std::vector<int64_t> counts(10, 0);
  for (int32_t label : ds->labels) {
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 10);
    ++counts[label];
  }
  for (int c = 0; c < 10; ++c) EXPECT_EQ(counts[c], expected_size / 10) << "class " << c;
}

TEST(FashionMnistTest, RealTrainSplit) { CheckRealSplit(Split::kTrain, 60000); }
TEST(FashionMnistTest, RealTestSplit) { CheckRealSplit(Split::kTest, 10000); }

TEST(FashionMnistTest, PrefersPlainFileOverGz) {
  TempDir dir;
  WritePlain(dir.File("t10k-images-idx3-ubyte"), IdxBytes({2, 1, 1}, {0, 255}));
  WriteGz(dir.File("t10k-images-idx3-ubyte.gz"), "garbage, must not be read");
  WriteGz(dir.File("t10k-labels-idx1-ubyte.gz"), IdxBytes({2}, {3, 1}));
  absl::StatusOr<Dataset> ds = LoadMnistStyle(dir.path(), Split::kTest);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_THAT(ds->labels, ElementsAre(3, 1));
  EXPECT_THAT(ds->features, ElementsAre(0.0f, 1.0f));
  EXPECT_EQ(ds->num_classes, 10);
}

TEST(FashionMnistTest, MissingDirectory) {
  TempDir dir;
  const std::string missing = dir.File("nowhere");
  absl::StatusOr<Dataset> ds = LoadMnistStyle(missing, Split::kTrain);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ds.status().message(),
            missing +
                ": no such directory (looking for the train split: train-images-idx3-ubyte[.gz] "
                "and train-labels-idx1-ubyte[.gz])");
}

TEST(FashionMnistTest, MissingFilesAreListed) {
  TempDir dir;
  WriteGz(dir.File("train-images-idx3-ubyte.gz"), IdxBytes({1, 1, 1}, {0}));
  absl::StatusOr<Dataset> ds = LoadMnistStyle(dir.path(), Split::kTrain);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kNotFound);
  const std::string labels = dir.File("train-labels-idx1-ubyte");
  EXPECT_EQ(ds.status().message(), dir.path() + ": missing MNIST-style train files; looked for " +
                                       labels + ", " + labels + ".gz");

  ds = LoadMnistStyle(dir.path(), Split::kTest);
  EXPECT_THAT(ds.status().message(), HasSubstr("t10k-images-idx3-ubyte.gz"));
  EXPECT_THAT(ds.status().message(), HasSubstr("t10k-labels-idx1-ubyte.gz"));
}

TEST(FashionMnistTest, LabelOutOfRange) {
  TempDir dir;
  WritePlain(dir.File("train-images-idx3-ubyte"), IdxBytes({3, 1, 1}, Iota(3)));
  const std::string labels = dir.File("train-labels-idx1-ubyte");
  WritePlain(labels, IdxBytes({3}, {1, 9, 10}));
  absl::StatusOr<Dataset> ds = LoadMnistStyle(dir.path(), Split::kTrain);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ds.status().message(), labels + ": label 10 at index 2 is outside [0, 10)");
}

TEST(FashionMnistTest, SplitName) {
  EXPECT_STREQ(SplitName(Split::kTrain), "train");
  EXPECT_STREQ(SplitName(Split::kTest), "test");
}

}  // namespace
}  // namespace kubetrain::data
