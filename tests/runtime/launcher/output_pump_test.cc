#include "runtime/launcher/output_pump.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <sstream>
#include <string>
#include <thread>

namespace kubetrain::launcher {
namespace {

// A pipe whose read end is non-blocking (as Process gives them).
void MakePipe(int fds[2]) {
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
}

void WriteAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = write(fd, s.data() + done, s.size() - done);
    ASSERT_GT(n, 0);
    done += static_cast<size_t>(n);
  }
}

TEST(OutputPumpTest, PrefixesLinesAndFlushesTheLastPartialLine) {
  LineWriter writer;
  OutputPump pump(&writer);
  ASSERT_TRUE(pump.Start().ok());
  std::ostringstream out;
  int fds[2];
  MakePipe(fds);
  const int id = pump.Add(fds[0], "[job-worker-0]", &out);
  WriteAll(fds[1], "hello\nwor");
  WriteAll(fds[1], "ld\r\n\nno newline");
  close(fds[1]);
  EXPECT_TRUE(pump.WaitDrained(id, std::chrono::steady_clock::now() + std::chrono::seconds(10)));
  EXPECT_EQ(out.str(),
            "[job-worker-0] hello\n[job-worker-0] world\n[job-worker-0] \n[job-worker-0] no "
            "newline\n");
  pump.Stop();
  pump.Stop();  // idempotent
}

TEST(OutputPumpTest, StopDrainsStreamsWhoseWritersAreStillOpen) {
  LineWriter writer;
  OutputPump pump(&writer);
  ASSERT_TRUE(pump.Start().ok());
  std::ostringstream out;
  int fds[2];
  MakePipe(fds);
  const int id = pump.Add(fds[0], "[p]", &out);
  WriteAll(fds[1], "a\nb");
  EXPECT_FALSE(pump.WaitDrained(id, std::chrono::steady_clock::now()));
  pump.Stop();
  EXPECT_EQ(out.str(), "[p] a\n[p] b\n");
  close(fds[1]);
}

TEST(OutputPumpTest, LinesFromManyStreamsNeverInterleave) {
  LineWriter writer;
  OutputPump pump(&writer);
  ASSERT_TRUE(pump.Start().ok());
  std::ostringstream out;
  constexpr int kStreams = 4;
  constexpr int kLines = 500;
  int write_ends[kStreams];
  int ids[kStreams];
  for (int s = 0; s < kStreams; ++s) {
    int fds[2];
    MakePipe(fds);
    write_ends[s] = fds[1];
    ids[s] = pump.Add(fds[0], "[s" + std::to_string(s) + "]", &out);
  }
  std::vector<std::thread> writers;
  for (int s = 0; s < kStreams; ++s) {
    writers.emplace_back([&, s] {
      const std::string line = std::string(300, static_cast<char>('a' + s)) + "\n";
      for (int i = 0; i < kLines; ++i) WriteAll(write_ends[s], line);
      close(write_ends[s]);
    });
  }
  for (std::thread& t : writers) t.join();
  for (int id : ids) {
    EXPECT_TRUE(pump.WaitDrained(id, std::chrono::steady_clock::now() + std::chrono::seconds(10)));
  }
  pump.Stop();
  std::istringstream lines(out.str());
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    ++count;
    ASSERT_EQ(line.size(), 5u + 300u) << line;
    const int s = line[2] - '0';
    EXPECT_EQ(line.substr(0, 5), "[s" + std::to_string(s) + "] ");
    EXPECT_EQ(line.substr(5), std::string(300, static_cast<char>('a' + s)));
  }
  EXPECT_EQ(count, kStreams * kLines);
}

}  // namespace
}  // namespace kubetrain::launcher
