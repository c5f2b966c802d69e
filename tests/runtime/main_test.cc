// Drives the real `kubetrain` binary: a tiny job succeeds and prints its
// final line; every kind of bad input gives ONE clear error line and a
// non-zero exit.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/idx_test_util.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_files.h"

namespace kubetrain {
namespace {

using data::testing_util::AsBytes;
using data::testing_util::IdxBytes;
using data::testing_util::TempDir;
using data::testing_util::WriteGz;
using data::testing_util::WritePlain;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing_util::ProcessResult;
using testing_util::RunProcess;

// A tiny MNIST-style set: class c images are bright in row band c.
std::vector<uint8_t> Images(int n) {
  std::vector<uint8_t> px(static_cast<size_t>(n) * 784, 0);
  for (int i = 0; i < n; ++i) {
    const int c = i % 10;
    for (int r = c * 2; r < c * 2 + 3; ++r) {
      for (int col = 0; col < 28; ++col) px[i * 784 + r * 28 + col] = 200;
    }
  }
  return px;
}
std::vector<uint8_t> Labels(int n) {
  std::vector<uint8_t> l(n);
  for (int i = 0; i < n; ++i) l[i] = static_cast<uint8_t>(i % 10);
  return l;
}

void WriteDataset(const TempDir& dir, int train, int test) {
  WriteGz(dir.File("train-images-idx3-ubyte.gz"),
          IdxBytes({uint32_t(train), 28, 28}, Images(train)));
  WriteGz(dir.File("train-labels-idx1-ubyte.gz"), IdxBytes({uint32_t(train)}, Labels(train)));
  WriteGz(dir.File("t10k-images-idx3-ubyte.gz"), IdxBytes({uint32_t(test), 28, 28}, Images(test)));
  WriteGz(dir.File("t10k-labels-idx1-ubyte.gz"), IdxBytes({uint32_t(test)}, Labels(test)));
}

ProcessResult Train(std::vector<std::string> args) {
  std::vector<std::string> argv = {KUBETRAIN_BIN,  "train", "--epochs",    "2",
                                   "--batch-size", "10",    "--log-every", "5"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv, std::chrono::seconds(60));
}

// One line on stderr, "kubetrain: error: ...", exit code in 1..127.
void ExpectOneErrorLine(const ProcessResult& r, const std::string& needle) {
  EXPECT_FALSE(r.timed_out);
  EXPECT_GE(r.exit_code, 1);
  EXPECT_LE(r.exit_code, 127);
  EXPECT_THAT(r.err, StartsWith("kubetrain: error: "));
  EXPECT_THAT(r.err, HasSubstr(needle));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(KubetrainTrain, TinyJobSucceedsWithProgressAndFinalLine) {
  TempDir dir;
  WriteDataset(dir, 200, 50);
  ProcessResult r = Train({"--data", dir.path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("progress step=5/40 epoch=1/2 loss="));
  EXPECT_THAT(r.out, HasSubstr("samples/s="));
  EXPECT_THAT(r.out, HasSubstr("eta="));
  EXPECT_THAT(r.out, HasSubstr("epoch epoch=2/2 step=40"));
  // The last line states the test accuracy and loss; this data is trivially
  // separable, so the model must have learnt it.
  const std::string last = r.out.substr(r.out.rfind('\n', r.out.size() - 2) + 1);
  EXPECT_THAT(last, StartsWith("final test_accuracy="));
  EXPECT_THAT(last, HasSubstr("test_loss="));
  const double acc = std::stod(last.substr(std::string("final test_accuracy=").size()));
  EXPECT_GE(acc, 0.9) << last;
}

TEST(KubetrainTrain, MissingDataDirectory) {
  ExpectOneErrorLine(Train({"--data", "/nonexistent/fmnist"}), "/nonexistent/fmnist");
}

TEST(KubetrainTrain, TruncatedIdxFile) {
  TempDir dir;
  WriteDataset(dir, 100, 20);
  std::string bytes = IdxBytes({100, 28, 28}, Images(100));
  WriteGz(dir.File("train-images-idx3-ubyte.gz"), bytes.substr(0, bytes.size() / 2));
  ExpectOneErrorLine(Train({"--data", dir.path()}), "truncated");
}

TEST(KubetrainTrain, WrongMagicNumber) {
  TempDir dir;
  WriteDataset(dir, 100, 20);
  std::string bytes = IdxBytes({100, 28, 28}, Images(100));
  bytes[0] = 0x12;
  WriteGz(dir.File("train-images-idx3-ubyte.gz"), bytes);
  ExpectOneErrorLine(Train({"--data", dir.path()}), "magic");
}

TEST(KubetrainTrain, LabelImageCountMismatch) {
  TempDir dir;
  WriteDataset(dir, 100, 20);
  WriteGz(dir.File("train-labels-idx1-ubyte.gz"), IdxBytes({99}, Labels(99)));
  ExpectOneErrorLine(Train({"--data", dir.path()}), "99 labels");
}

TEST(KubetrainTrain, UnknownLayerInModelFile) {
  TempDir dir;
  WriteDataset(dir, 100, 20);
  WritePlain(dir.File("model.yaml"), "layers:\n  - flatten\n  - {type: dense2, units: 10}\n");
  ExpectOneErrorLine(Train({"--data", dir.path(), "--model", dir.File("model.yaml")}),
                     "layers[1] (dense2): unknown layer type 'dense2'");
}

TEST(KubetrainTrain, ShapeMismatchInModelFile) {
  TempDir dir;
  WriteDataset(dir, 100, 20);
  WritePlain(dir.File("model.json"), R"({"layers": [{"type": "dense", "units": 10}]})");
  ExpectOneErrorLine(Train({"--data", dir.path(), "--model", dir.File("model.json")}),
                     "layers[0] (dense): expects a flat input, got [28, 28, 1]");
}

TEST(KubetrainTrain, ModelWithWrongClassCount) {
  TempDir dir;
  WriteDataset(dir, 100, 20);
  WritePlain(dir.File("model.yaml"), "layers: [flatten, {type: dense, units: 5}]\n");
  ExpectOneErrorLine(Train({"--data", dir.path(), "--model", dir.File("model.yaml")}),
                     "the model has 5 outputs");
}

TEST(KubetrainTrain, MalformedModelFile) {
  TempDir dir;
  WriteDataset(dir, 100, 20);
  WritePlain(dir.File("model.yaml"), "layers: [flatten, {type: dense\n");
  ExpectOneErrorLine(Train({"--data", dir.path(), "--model", dir.File("model.yaml")}),
                     "malformed YAML/JSON at line");
}

TEST(KubetrainTrain, BadFlagValueIsRefused) {
  ProcessResult r = Train({"--optimizer", "rmsprop"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--optimizer"));
}

TEST(KubetrainTrain, HelpDocumentsEveryFlagWithItsDefault) {
  ProcessResult r = RunProcess({KUBETRAIN_BIN, "train", "--help"}, std::chrono::seconds(10));
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag :
       {"--model", "--data", "--epochs", "--batch-size", "--lr", "--optimizer", "--momentum",
        "--weight-decay", "--lr-schedule", "--seed", "--shard-index", "--num-shards", "--log-every",
        "--threads", "--train-csv"}) {
    EXPECT_THAT(r.out, HasSubstr(flag)) << flag;
  }
  EXPECT_THAT(r.out, HasSubstr("--model TEXT=mlp"));
  EXPECT_THAT(r.out, HasSubstr("=/usr/share/datasets/fashion-mnist"));
  EXPECT_THAT(r.out, HasSubstr("--batch-size INT:POSITIVE=64"));
}

}  // namespace
}  // namespace kubetrain

namespace kubetrain {
namespace {

TEST(KubetrainTrain, FlagsCanComeFromAConfigFileAndTheCommandLineWins) {
  TempDir dir;
  WriteDataset(dir, 200, 50);
  WritePlain(dir.File("train.toml"),
             "[train]\nepochs = 1\nbatch-size = 20\nlog-every = 5\nlr = 0.05\n");
  ProcessResult r = RunProcess({KUBETRAIN_BIN, "train", "--config", dir.File("train.toml"),
                                "--data", dir.path(), "--batch-size", "40"},
                               std::chrono::seconds(60));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 200 samples / batch 40 (command line beats the file's 20) x 1 epoch (file).
  EXPECT_THAT(r.out, HasSubstr("progress step=5/5 epoch=1/1"));
  ProcessResult bad = RunProcess({KUBETRAIN_BIN, "train", "--config", dir.File("missing.toml")},
                                 std::chrono::seconds(10));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("missing.toml"));
}

}  // namespace
}  // namespace kubetrain
