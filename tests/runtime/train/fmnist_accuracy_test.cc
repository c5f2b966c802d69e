// Trains the built-in models on the real Fashion-MNIST for a shortened
// schedule and checks a meaningful accuracy bound. Full-schedule figures
// (mlp >= 0.88, cnn >= 0.90) are in docs/accuracy.md.
#include <filesystem>
#include <sstream>

#include "gtest/gtest.h"
#include "runtime/train/train_command.h"

namespace kubetrain::train {
namespace {

constexpr char kData[] = "/usr/share/datasets/fashion-mnist";

absl::StatusOr<TrainResult> TrainBuiltin(const std::string& model, int64_t epochs) {
  TrainCommandOptions o;
  o.model = model;
  o.data_dir = kData;
  o.trainer.epochs = epochs;
  o.trainer.log_every_steps = 0;
  o.trainer.eval_every_epoch = false;
  std::ostringstream out;
  RealClock clock;
  absl::StatusOr<TrainResult> r = RunTraining(o, out, clock);
  std::cout << out.str();
  return r;
}

class FashionMnist : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(std::string(kData) + "/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "Fashion-MNIST is not installed at " << kData
                   << " (Debian package dataset-fashion-mnist; scripts/setup.sh installs it)";
    }
  }
};

TEST_F(FashionMnist, MlpOneEpochReaches084) {
  absl::StatusOr<TrainResult> r = TrainBuiltin("mlp", 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->test.samples, 10000);
  EXPECT_GE(r->test.accuracy, 0.84);
}

TEST_F(FashionMnist, CnnOneEpochReaches086) {
  absl::StatusOr<TrainResult> r = TrainBuiltin("cnn", 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GE(r->test.accuracy, 0.86);
}

}  // namespace
}  // namespace kubetrain::train
