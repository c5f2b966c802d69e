// The termination message a failing runtime leaves (Kubernetes'
// terminationMessagePath): the last "kubetrain: error:" line written to its
// error stream, which still reaches that stream whole; the file it goes
// to; and the replica's one-line error through the real binary.
#include "runtime/train/termination_message.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "gtest/gtest.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_files.h"

namespace kubetrain::train {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(TerminationMessage, TheLastErrorLineIsKeptAndEverythingPassesOn) {
  std::ostringstream passed;
  ErrorTee tee(passed);
  std::ostream err(&tee);
  EXPECT_EQ(tee.last_error(), "");
  err << "kubetrain: error: first\n";
  err << "kubetrain: error: worker-0: unknown model 'xyz' (known: cnn, mlp)" << std::endl;
  err << "kubetrain: worker-0 stopped\n";
  EXPECT_EQ(tee.last_error(), "kubetrain: error: worker-0: unknown model 'xyz' (known: cnn, mlp)");
  EXPECT_EQ(passed.str(),
            "kubetrain: error: first\n"
            "kubetrain: error: worker-0: unknown model 'xyz' (known: cnn, mlp)\n"
            "kubetrain: worker-0 stopped\n");
  // Without an error line, the last line.
  std::ostringstream other;
  ErrorTee plain(other);
  std::ostream o(&plain);
  o << "a\nb\n";
  EXPECT_EQ(plain.last_error(), "b");
}

TEST(TerminationMessage, ThePathAndTheFile) {
  data::testing_util::TempDir dir;
  const std::string path = dir.File("termination-log");
  std::map<std::string, std::string> env = {{"KUBETRAIN_TERMINATION_LOG", path}};
  auto getenv = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_EQ(TerminationLogPath(getenv), path);
  ASSERT_TRUE(WriteTerminationMessage(path, "kubetrain: error: bad").ok());
  ASSERT_TRUE(WriteTerminationMessage(path, "kubetrain: error: worse").ok());
  EXPECT_EQ(Read(path), "kubetrain: error: worse\n");
  env.clear();
  EXPECT_EQ(TerminationLogPath(getenv),
            std::filesystem::exists("/dev/termination-log") ? "/dev/termination-log" : "");
  EXPECT_FALSE(WriteTerminationMessage(dir.File("no/such/dir/log"), "x").ok());
}

// The binary: a replica refused for its configuration writes its one line
// there, and exits 1.
TEST(TerminationMessage, AFailingReplicaWritesItsLine) {
  data::testing_util::TempDir dir;
  const std::string path = dir.File("termination-log");
  testing_util::ProcessResult r =
      testing_util::RunProcess({"/usr/bin/env", "KUBETRAIN_TERMINATION_LOG=" + path, KUBETRAIN_BIN,
                                "train", "--model", "xyz", "--metrics-port", "0"},
                               std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(Read(path).rfind("kubetrain: error:", 0), 0u) << Read(path);
  EXPECT_NE(Read(path).find("xyz"), std::string::npos) << Read(path);
}

}  // namespace
}  // namespace kubetrain::train
