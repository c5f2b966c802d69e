#include "tools/node_agent/container_log_index.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tests/support/temp_files.h"

namespace kubetrain::node_agent {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ContainerLogIndexTest, RecordsWhereEachRunStartsAndEndsInTheAppendedLog) {
  data::testing_util::TempDir dir;
  const std::string log = dir.File("main.log");
  ASSERT_TRUE(CreateRunIndex(log).ok());
  EXPECT_TRUE(ParseRunIndex(Read(RunIndexPath(log))).empty());
  ASSERT_TRUE(RecordRunStart(log).ok());  // no log yet: offset 0
  std::ofstream(log, std::ios::app) << "first run\n";
  ASSERT_TRUE(RecordRunEnd(log, 137).ok());
  ASSERT_TRUE(RecordRunStart(log).ok());
  std::ofstream(log, std::ios::app) << "second\n";
  EXPECT_EQ(Read(RunIndexPath(log)), "start 0\nend 10 137\nstart 10\n");
  EXPECT_EQ(ParseRunIndex(Read(RunIndexPath(log))),
            (std::vector<LogRun>{{0, 10}, {10, std::nullopt}}));
}

TEST(ContainerLogIndexTest, ParsingSkipsAPartialLastLineAndClosesARunWhoseEndWasLost) {
  EXPECT_EQ(ParseRunIndex("start 0\nend 5 1\nstart 5\nend 9"),
            (std::vector<LogRun>{{0, 5}, {5, std::nullopt}}));
  // An agent killed mid-run wrote no end: the next start closes it.
  EXPECT_EQ(ParseRunIndex("start 0\nstart 7\ngarbage\nend x\n"),
            (std::vector<LogRun>{{0, 7}, {7, std::nullopt}}));
  EXPECT_TRUE(ParseRunIndex("").empty());
}

TEST(ContainerLogIndexTest, CurrentIsTheLatestRunAndPreviousTheOneBefore) {
  const std::vector<LogRun> two = {{0, 10}, {10, std::nullopt}};
  EXPECT_EQ(*SelectRun(two, false, "p", "c"), (LogRun{10, std::nullopt}));
  EXPECT_EQ(*SelectRun(two, true, "p", "c"), (LogRun{0, 10}));
  // Waiting to restart (CrashLoopBackOff): the run that just ended is both.
  const std::vector<LogRun> ended = {{0, 10}, {10, 20}};
  EXPECT_EQ(*SelectRun(ended, false, "p", "c"), (LogRun{10, 20}));
  EXPECT_EQ(*SelectRun(ended, true, "p", "c"), (LogRun{10, 20}));
  absl::StatusOr<LogRun> none = SelectRun({{0, std::nullopt}}, true, "w-0", "main");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(none.status().message(),
            "previous terminated container \"main\" in pod \"w-0\" not found");
  absl::StatusOr<LogRun> waiting = SelectRun({}, false, "w-0", "main");
  EXPECT_EQ(waiting.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(waiting.status().message(),
            "container \"main\" in pod \"w-0\" is waiting to start: ContainerCreating");
}

TEST(ContainerLogIndexTest, TailStartFindsTheLastLines) {
  EXPECT_EQ(TailStart("a\nb\nc\n", 1), 4u);
  EXPECT_EQ(TailStart("a\nb\nc\n", 2), 2u);
  EXPECT_EQ(TailStart("a\nb\nc\n", 3), 0u);
  EXPECT_EQ(TailStart("a\nb\nc\n", 9), 0u);
  EXPECT_EQ(TailStart("a\nb\nc\n", 0), 6u);
  EXPECT_EQ(TailStart("a\nb\npartial", 1), 4u);  // an unfinished line is a line
  EXPECT_EQ(TailStart("", 3), 0u);
}

}  // namespace
}  // namespace kubetrain::node_agent
