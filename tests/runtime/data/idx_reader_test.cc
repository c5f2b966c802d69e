#include "runtime/data/idx_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

TEST(ReadIdxTest, ReadsPlainFile) {
  TempDir dir;
  const std::string path = dir.File("images-idx3-ubyte");
  WritePlain(path, IdxBytes({3, 2, 2}, Iota(12)));
  absl::StatusOr<IdxArray> a = ReadIdx(path);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->dims, ElementsAre(3, 2, 2));
  EXPECT_EQ(a->data, Iota(12));
}

TEST(ReadIdxTest, ReadsGzipFile) {
  TempDir dir;
  const std::string path = dir.File("labels-idx1-ubyte.gz");
  WriteGz(path, IdxBytes({5}, {9, 0, 3, 255, 1}));
  absl::StatusOr<IdxArray> a = ReadIdx(path);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->dims, ElementsAre(5));
  EXPECT_THAT(a->data, ElementsAre(9, 0, 3, 255, 1));
}

TEST(ReadIdxTest, ReadsLargeDimsAcrossChunks) {
  TempDir dir;
  const std::string path = dir.File("big.gz");
  // 1000 x 100 x 100 = 10 MB, more than one internal read chunk.
  std::vector<uint8_t> data(1000 * 100 * 100);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7);
  WriteGz(path, IdxBytes({1000, 100, 100}, data));
  absl::StatusOr<IdxArray> a = ReadIdx(path);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->data, data);
}

TEST(ReadIdxTest, MissingFileIsNotFound) {
  TempDir dir;
  const std::string path = dir.File("nope-idx1-ubyte");
  absl::StatusOr<IdxArray> a = ReadIdx(path);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(a.status().message(), path + ": no such file");
}

TEST(ReadIdxTest, DirectoryIsAnError) {
  TempDir dir;
  absl::StatusOr<IdxArray> a = ReadIdx(dir.path());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status().message(), HasSubstr("is a directory"));
}

TEST(ReadIdxTest, EmptyFile) {
  TempDir dir;
  const std::string path = dir.File("empty");
  WritePlain(path, "");
  absl::StatusOr<IdxArray> a = ReadIdx(path);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.status().message(), path + ": empty file");
}

TEST(ReadIdxTest, TruncatedHeader) {
  TempDir dir;
  const std::string path = dir.File("short");
  WritePlain(path, IdxBytes({60000, 28, 28}, {}).substr(0, 10));
  absl::StatusOr<IdxArray> a = ReadIdx(path);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status().message(), HasSubstr(path + ": truncated: header declares 3 dimensions"));
  EXPECT_THAT(a.status().message(), HasSubstr("file has 10 bytes"));
}

TEST(ReadIdxTest, TruncatedDataPlainAndGz) {
  TempDir dir;
  for (const char* name : {"images", "images.gz"}) {
    const std::string path = dir.File(name);
    const std::string bytes = IdxBytes({60000, 28, 28}, Iota(200));
    if (std::string(name).ends_with(".gz")) {
      WriteGz(path, bytes);
    } else {
      WritePlain(path, bytes);
    }
    absl::StatusOr<IdxArray> a = ReadIdx(path);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(a.status().message(),
              path +
                  ": truncated: header says 60000 images of 28x28 (47040000 bytes of data), "
                  "file has 200 bytes after the 16-byte header");
  }
}

TEST(ReadIdxTest, TruncatedGzipStream) {
  TempDir dir;
  const std::string whole = dir.File("whole.gz");
  std::vector<uint8_t> data(5000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 31 + i / 7);
  WriteGz(whole, IdxBytes({5000}, data));
  const std::string gz = testing_util::ReadPlain(whole);
  const std::string path = dir.File("cut.gz");
  WritePlain(path, gz.substr(0, gz.size() / 2));
  absl::StatusOr<IdxArray> a = ReadIdx(path);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status().message(), HasSubstr(path + ": truncated gzip stream"));
}

TEST(ReadIdxTest, WrongMagic) {
  TempDir dir;
  // A doubly gzipped file decompresses once to gzip bytes 1f 8b 08 00.
  const std::string inner = dir.File("inner.gz");
  WriteGz(inner, IdxBytes({2}, {1, 2}));
  const std::string path = dir.File("double.gz");
  WriteGz(path, testing_util::ReadPlain(inner));
  absl::StatusOr<IdxArray> a = ReadIdx(path);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status().message(), HasSubstr(path + ": not an IDX file (magic 0x1f8b0800"));

  const std::string text = dir.File("text.csv");
  WritePlain(text, "label,pixel1\n1,2\n");
  a = ReadIdx(text);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status().message(), HasSubstr(text + ": not an IDX file (magic 0x6c616265"));
}

TEST(ReadIdxTest, UnsupportedElementType) {
  TempDir dir;
  const std::string path = dir.File("floats");
  WritePlain(path, IdxBytes({1}, {0, 0, 0, 0}, 0x0D));
  absl::StatusOr<IdxArray> a = ReadIdx(path);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.status().message(),
            path +
                ": unsupported IDX element type 0x0d (float32); only unsigned byte (0x08) is "
                "supported");
}

TEST(ReadIdxTest, ZeroDimensions) {
  TempDir dir;
  const std::string path = dir.File("scalar");
  WritePlain(path, IdxBytes({}, {7}));
  absl::StatusOr<IdxArray> a = ReadIdx(path);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status().message(), HasSubstr("0 dimensions"));
}

TEST(ReadIdxTest, ImplausiblyLargeHeader) {
  TempDir dir;
  const std::string path = dir.File("huge");
  WritePlain(path, IdxBytes({0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, Iota(10)));
  absl::StatusOr<IdxArray> a = ReadIdx(path);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status().message(), HasSubstr("implausibly large"));
}

TEST(ReadIdxTest, TrailingBytesAreAnError) {
  TempDir dir;
  const std::string path = dir.File("labels.gz");
  std::string bytes = IdxBytes({4}, {1, 2, 3, 4});
  bytes += "xyz";
  WriteGz(path, bytes);
  absl::StatusOr<IdxArray> a = ReadIdx(path);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.status().message(),
            path +
                ": 3 unexpected trailing bytes after the 4 bytes of data the header declares "
                "(4 labels)");
}

TEST(LoadIdxDatasetTest, LoadsScaledImagesAndLabels) {
  TempDir dir;
  const std::string images = dir.File("images.gz");
  const std::string labels = dir.File("labels");
  WriteGz(images, IdxBytes({2, 2, 3}, {0, 255, 51, 102, 1, 254, 10, 20, 30, 40, 50, 60}));
  WritePlain(labels, IdxBytes({2}, {4, 2}));
  absl::StatusOr<Dataset> ds = LoadIdxDataset(images, labels);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->size(), 2);
  EXPECT_THAT(ds->sample_shape, ElementsAre(2, 3, 1));
  EXPECT_EQ(ds->SampleSize(), 6);
  EXPECT_THAT(ds->labels, ElementsAre(4, 2));
  EXPECT_EQ(ds->num_classes, 5);
  ASSERT_EQ(ds->features.size(), 12u);
  EXPECT_EQ(ds->features[0], 0.0f);
  EXPECT_EQ(ds->features[1], 1.0f);
  EXPECT_FLOAT_EQ(ds->features[2], 0.2f);
  EXPECT_FLOAT_EQ(ds->features[3], 0.4f);
  EXPECT_EQ(ds->features[4], 1.0f / 255.0f);
  EXPECT_FLOAT_EQ(ds->Sample(1)[0], 10.0f / 255.0f);
}

TEST(LoadIdxDatasetTest, CountMismatch) {
  TempDir dir;
  const std::string images = dir.File("images");
  const std::string labels = dir.File("labels");
  WritePlain(images, IdxBytes({5, 2, 2}, Iota(20)));
  WritePlain(labels, IdxBytes({4}, {0, 1, 2, 3}));
  absl::StatusOr<Dataset> ds = LoadIdxDataset(images, labels);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ds.status().message(), images + ", " + labels + ": 5 images but 4 labels");
}

TEST(LoadIdxDatasetTest, WrongRanks) {
  TempDir dir;
  const std::string images = dir.File("images");
  const std::string labels = dir.File("labels");
  WritePlain(images, IdxBytes({5, 2, 2}, Iota(20)));
  WritePlain(labels, IdxBytes({5}, {0, 1, 2, 3, 4}));
  // Arguments swapped.
  absl::StatusOr<Dataset> ds = LoadIdxDataset(labels, images);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ds.status().message(),
            labels + ": images must be 3-D (count x rows x cols), file is 1-D (5)");

  const std::string flat = dir.File("flat");
  WritePlain(flat, IdxBytes({5, 4}, Iota(20)));
  ds = LoadIdxDataset(flat, labels);
  EXPECT_THAT(ds.status().message(), HasSubstr("file is 2-D (5x4)"));

  ds = LoadIdxDataset(images, images);
  EXPECT_EQ(ds.status().message(), images + ": labels must be 1-D (count), file is 3-D (5x2x2)");
}

TEST(LoadIdxDatasetTest, PropagatesReadErrors) {
  TempDir dir;
  const std::string images = dir.File("images");
  WritePlain(images, IdxBytes({1, 1, 1}, {0}));
  absl::StatusOr<Dataset> ds = LoadIdxDataset(images, dir.File("missing"));
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ds.status().message(), HasSubstr("missing: no such file"));
}

TEST(LoadIdxDatasetTest, EmptyDatasetIsAnError) {
  TempDir dir;
  const std::string images = dir.File("images");
  const std::string labels = dir.File("labels");
  WritePlain(images, IdxBytes({0, 28, 28}, {}));
  WritePlain(labels, IdxBytes({0}, {}));
  absl::StatusOr<Dataset> ds = LoadIdxDataset(images, labels);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ds.status().message(), images + ": contains 0 images");
}

}  // namespace
}  // namespace kubetrain::data
