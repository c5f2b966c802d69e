#include "runtime/data/csv_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/status/status.h"
#include "tests/support/temp_files.h"

namespace kubetrain::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_util::TempDir;
using testing_util::WriteGz;
using testing_util::WritePlain;

class CsvReaderTest : public ::testing::Test {
 protected:
  // Writes `text` to a fresh file and loads it.
  absl::StatusOr<Dataset> Load(const std::string& text, const CsvOptions& options = {}) {
    path_ = dir_.File("data.csv");
    WritePlain(path_, text);
    return LoadCsv(path_, options);
  }
  // Expects InvalidArgument with exactly "<path>:<message>".
  void ExpectError(const std::string& text, const std::string& message,
                   const CsvOptions& options = {}) {
    absl::StatusOr<Dataset> ds = Load(text, options);
    EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(ds.status().message(), path_ + ":" + message) << text;
  }

  TempDir dir_;
  std::string path_;
};

TEST_F(CsvReaderTest, WithHeaderAutoDetected) {
  absl::StatusOr<Dataset> ds = Load("label,a,b,c\n2,0.5,1,-3\n0,4,5e-1,6\n");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->size(), 2);
  EXPECT_THAT(ds->sample_shape, ElementsAre(3));
  EXPECT_THAT(ds->labels, ElementsAre(2, 0));
  EXPECT_THAT(ds->features, ElementsAre(0.5f, 1.0f, -3.0f, 4.0f, 0.5f, 6.0f));
  EXPECT_EQ(ds->num_classes, 3);
}

TEST_F(CsvReaderTest, WithoutHeaderAutoDetected) {
  absl::StatusOr<Dataset> ds = Load("1,10,20\n3,30,40\n");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_THAT(ds->labels, ElementsAre(1, 3));
  EXPECT_THAT(ds->features, ElementsAre(10, 20, 30, 40));
  EXPECT_EQ(ds->num_classes, 4);
}

TEST_F(CsvReaderTest, ExplicitHeaderFlag) {
  CsvOptions header;
  header.has_header = true;
  // A numeric first line is skipped when told it is a header.
  absl::StatusOr<Dataset> ds = Load("0,1,2\n1,10,20\n", header);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_THAT(ds->labels, ElementsAre(1));

  CsvOptions no_header;
  no_header.has_header = false;
  ExpectError("label,x\n1,2\n", "1: label 'label' in column 1 is not a number", no_header);
}

TEST_F(CsvReaderTest, OptionsScaleShapeLabelColumnDelimiter) {
  CsvOptions options;
  options.label_column = -1;
  options.scale = 0.5f;
  options.sample_shape = {2, 2, 1};
  options.delimiter = ';';
  absl::StatusOr<Dataset> ds = Load(" 2 ; 4 ;6;8; 7\r\n\r\n+4;2;0;-2;1\r\n", options);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_THAT(ds->sample_shape, ElementsAre(2, 2, 1));
  EXPECT_THAT(ds->labels, ElementsAre(7, 1));
  EXPECT_THAT(ds->features, ElementsAre(1, 2, 3, 4, 2, 1, 0, -1));
  EXPECT_EQ(ds->num_classes, 8);

  options = {};
  options.label_column = 2;
  ds = Load("\xEF\xBB\xBFx,y,class\n1,2,3.0\n", options);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_THAT(ds->labels, ElementsAre(3));
  EXPECT_THAT(ds->features, ElementsAre(1, 2));
}

TEST_F(CsvReaderTest, ReadsGzip) {
  const std::string path = dir_.File("data.csv.gz");
  WriteGz(path, "label,p\n1,255\n0,0\n");
  CsvOptions options;
  options.scale = 1.0f / 255.0f;
  absl::StatusOr<Dataset> ds = LoadCsv(path, options);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_THAT(ds->labels, ElementsAre(1, 0));
  EXPECT_THAT(ds->features, ElementsAre(1.0f, 0.0f));
}

TEST_F(CsvReaderTest, ReadsLongFileAcrossBufferBoundaries) {
  std::string text = "label,a,b\n";
  for (int i = 0; i < 20000; ++i)
    text += std::to_string(i % 7) + ",1.25," + std::to_string(i) + "\n";
  absl::StatusOr<Dataset> ds = Load(text);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->size(), 20000);
  EXPECT_EQ(ds->labels[19999], 19999 % 7);
  EXPECT_EQ(ds->Sample(12345)[1], 12345.0f);
  EXPECT_EQ(ds->num_classes, 7);
}

TEST_F(CsvReaderTest, NonNumericField) {
  ExpectError("label,a,b\n1,2,3\n0,4,x5\n", "3: field 'x5' in column 3 is not a number");
  ExpectError("1,2,3\n0,,5\n", "2: empty field in column 2 is not a number");
  ExpectError("1,2,nan\n", "1: field 'nan' in column 3 is not a finite number");
  ExpectError("1,2,1e99\n", "1: field '1e99' in column 3 is out of float range");
}

TEST_F(CsvReaderTest, WrongColumnCount) {
  ExpectError("label,a,b\n1,2,3\n\n0,4\n",
              "4: found 2 columns, expected 3 (as in the header on line 1)");
  ExpectError("1,2,3\n0,4,5,6\n", "2: found 4 columns, expected 3 (as in the first row on line 1)");
  ExpectError("7\n", "1: found 1 column; need a label column and at least one feature column");
}

TEST_F(CsvReaderTest, BadLabels) {
  ExpectError("label,a\n1,2\n-1,3\n", "3: label '-1' in column 1 is negative");
  ExpectError("label,a\n1,2\n2.5,3\n", "3: label '2.5' in column 1 is not an integer");
  ExpectError("label,a\n1,2\ncat,3\n", "3: label 'cat' in column 1 is not a number");
  ExpectError("label,a\n1,2\n1e12,3\n", "3: label '1e12' in column 1 is too large");
}

TEST_F(CsvReaderTest, LabelColumnOutOfRange) {
  CsvOptions options;
  options.label_column = 3;
  ExpectError("a,b,c\n1,2,3\n", "1: label_column 3 is outside the 3 columns of this header",
              options);
}

TEST_F(CsvReaderTest, EmptyFileAndHeaderOnly) {
  absl::StatusOr<Dataset> ds = Load("");
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ds.status().message(), path_ + ": empty file");

  ds = Load("\n  \n");
  EXPECT_EQ(ds.status().message(), path_ + ": empty file");

  ds = Load("label,a\n");
  EXPECT_EQ(ds.status().message(), path_ + ": no data rows after the header on line 1");
}

TEST_F(CsvReaderTest, SampleShapeMismatch) {
  CsvOptions options;
  options.sample_shape = {2, 2};
  ExpectError("\nlabel,a,b,c\n1,2,3,4\n",
              "2: sample_shape 2x2 has 4 elements but the header has 3 feature columns", options);
  options.sample_shape = {0, 3};
  absl::StatusOr<Dataset> ds = Load("1,2,3,4\n", options);
  EXPECT_EQ(ds.status().message(), path_ + ": sample_shape 0x3 has a non-positive dimension");
}

TEST_F(CsvReaderTest, MissingFile) {
  const std::string path = dir_.File("missing.csv");
  absl::StatusOr<Dataset> ds = LoadCsv(path, {});
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ds.status().message(), path + ": no such file");
}

}  // namespace
}  // namespace kubetrain::data
