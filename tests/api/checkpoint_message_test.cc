#include "api/checkpoint_message.h"

#include "gtest/gtest.h"

namespace kubetrain::api {
namespace {

TEST(CheckpointMessage, FormatsAndParsesBack) {
  const CheckpointMessage m{1200, "/ckpt/dir with space/ckpt-000000001200.ckpt"};
  const std::string line = FormatCheckpointMessage(m);
  EXPECT_EQ(line,
            "kubetrain: checkpoint step=1200 path=/ckpt/dir with space/ckpt-000000001200.ckpt");
  EXPECT_EQ(ParseCheckpointMessage(line), m);
  EXPECT_EQ(ParseCheckpointMessage(line + "\n"), m);
}

TEST(CheckpointMessage, TakesTheLastCheckpointLineAmongLogLines) {
  EXPECT_EQ(ParseCheckpointMessage("progress step=10\n"
                                   "kubetrain: checkpoint step=5 path=/a\n"
                                   "kubetrain: worker-0 stopped by signal 15\n"
                                   "kubetrain: checkpoint step=7 path=/b\n"),
            (CheckpointMessage{7, "/b"}));
}

TEST(CheckpointMessage, RefusesWhatIsNotOne) {
  for (const char* m :
       {"", "kubetrain: error: worker-0: lost worker-1", "kubetrain: checkpoint step=12",
        "kubetrain: checkpoint step= path=/a", "kubetrain: checkpoint step=-3 path=/a",
        "kubetrain: checkpoint step=x path=/a", "kubetrain: checkpoint step=3 path=",
        "kubetrain: checkpoint step=3 file=/a", "  kubetrain: checkpoint step=3 path=/a"}) {
    EXPECT_EQ(ParseCheckpointMessage(m), std::nullopt) << m;
  }
}

}  // namespace
}  // namespace kubetrain::api
